// What only the SQLite metadata store has: its database is a file that may
// be another application's, or no database at all. The MetadataStore
// contract itself is tested on SQLite and PostgreSQL alike by
// metadata_store_conformance_test.cc.
#include "server/store/sqlite_metadata_store.h"

#include <sqlite3.h>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/file.h"

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;

TEST(SqliteMetadataStoreTest, ForeignFilesAreRefused) {
  TempDir dir;
  const std::string path = dir.path() + "/metadata.db";
  // Another application's SQLite database.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "PRAGMA application_id = 7; CREATE TABLE t (x)",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  EXPECT_THAT(SqliteMetadataStore::Open(path).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "not a bnn-serve metadata database"));
  // Not a database at all.
  const std::string text = dir.path() + "/text.db";
  ASSERT_TRUE(WriteFileAtomically(text, std::string(4096, 'x')).ok());
  EXPECT_THAT(SqliteMetadataStore::Open(text).status(),
              StatusIs(absl::StatusCode::kDataLoss, "text.db"));
}

}  // namespace
}  // namespace bnn::server
