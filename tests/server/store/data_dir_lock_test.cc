// The data directory's lock (one server per directory, naming the flag and
// the holder) and its server id (made once, kept across restarts).
#include "server/store/data_dir_lock.h"

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/file.h"

#include "server/store/ids.h"
#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;

TEST(DataDirLockTest, SecondHolderIsRefusedNamingTheFlag) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<DataDirLock>> first =
      DataDirLock::Acquire(dir.path() + "/blobs", "--blob-dir");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(
      DataDirLock::Acquire(dir.path() + "/blobs", "--blob-dir").status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "--blob-dir " + dir.path() + "/blobs is in use"));
  first->reset();
  EXPECT_TRUE(DataDirLock::Acquire(dir.path() + "/blobs").ok());
}

TEST(DataDirLockTest, ServerIdIsMadeOnceAndKept) {
  TempDir dir;
  absl::StatusOr<std::string> id = LoadOrCreateServerId(dir.path());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(IsId(kServerIdPrefix, *id)) << *id;
  EXPECT_EQ(LoadOrCreateServerId(dir.path()).value_or(""), *id);
  TempDir other;
  EXPECT_NE(LoadOrCreateServerId(other.path()).value_or(*id), *id);
  ASSERT_TRUE(
      WriteFileAtomically(dir.path() + "/server-id", "not an id\n").ok());
  EXPECT_THAT(LoadOrCreateServerId(dir.path()).status(),
              StatusIs(absl::StatusCode::kDataLoss, "server-id"));
}

}  // namespace
}  // namespace bnn::server
