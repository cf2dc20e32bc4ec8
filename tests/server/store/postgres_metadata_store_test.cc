// What only the PostgreSQL metadata store has, against a real server
// (tests/test_util/postgres_server.h): URIs and their passwords, a database
// that is another application's, replicas migrating an empty database
// together and seeing each other's commits at once, a connection the server
// drops. The MetadataStore contract itself is tested on SQLite and
// PostgreSQL alike by metadata_store_conformance_test.cc.
#include "server/store/postgres_metadata_store.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/status.h"

#include "tests/server/server_test_util.h"
#include "tests/test_util/postgres_server.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::testing::PickFreePort;
using ::bnn::testing::PostgresEnvironment;
using ::bnn::testing::PostgresServer;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "s3cr%40t-pw";
// kSecret as libpq decodes it.
constexpr char kDecodedSecret[] = "s3cr@t-pw";

TEST(PostgresMetadataStoreTest, RedactUriHidesEveryPassword) {
  EXPECT_EQ(PostgresMetadataStore::RedactUri("postgres://u:pw@h:5432/db"),
            "postgres://u:***@h:5432/db");
  EXPECT_EQ(PostgresMetadataStore::RedactUri(
                "postgresql://u:p%40w@h/db?sslmode=disable&password=x2"),
            "postgresql://u:***@h/db?sslmode=disable&password=***");
  EXPECT_EQ(PostgresMetadataStore::RedactUri("postgres://u@h/db"),
            "postgres://u@h/db");
  EXPECT_EQ(PostgresMetadataStore::RedactUri("postgres://h/db?password=x"),
            "postgres://h/db?password=***");
  EXPECT_TRUE(PostgresMetadataStore::IsUri("postgres://h/db"));
  EXPECT_TRUE(PostgresMetadataStore::IsUri("postgresql://h/db"));
  EXPECT_FALSE(PostgresMetadataStore::IsUri("/var/lib/bnn/metadata.db"));
}

TEST(PostgresMetadataStoreTest, BadOptionsAndUrisAreInvalidArgument) {
  PostgresMetadataStore::Options options;
  options.connections = 0;
  EXPECT_THAT(options.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "connections: must be in [1, 64], got 0"));
  options = PostgresMetadataStore::Options();
  options.connect_timeout = absl::Milliseconds(10);
  EXPECT_THAT(options.Validate(),
              StatusIs(absl::StatusCode::kInvalidArgument, "connect_timeout"));
  EXPECT_THAT(
      PostgresMetadataStore::Open("mysql://u:pw@h/db").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "not a PostgreSQL URI"));
  const absl::Status bad =
      PostgresMetadataStore::Open(
          absl::StrCat("postgres://u:", kSecret, "@h:5432/db?no_such_option=1"))
          .status();
  EXPECT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "is not a valid connection URI"));
  EXPECT_THAT(std::string(bad.message()), Not(HasSubstr("s3cr")));
}

TEST(PostgresMetadataStoreTest, PasswordIsNeverInAMessage) {
  PostgresServer* server = PostgresEnvironment::server();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server
                  ->Exec("postgres",
                         absl::StrCat("CREATE DATABASE password_test OWNER ",
                                      PostgresServer::kPasswordUser))
                  .ok());
  const std::string host = absl::StrCat("127.0.0.1:", server->port());
  // The wrong password.
  const absl::Status wrong =
      PostgresMetadataStore::Open(
          absl::StrCat("postgres://", PostgresServer::kPasswordUser, ":",
                       kSecret, "@", host, "/password_test"))
          .status();
  EXPECT_THAT(wrong, StatusIs(absl::StatusCode::kUnavailable,
                              "password authentication failed"));
  EXPECT_THAT(std::string(wrong.message()),
              HasSubstr(absl::StrCat(PostgresServer::kPasswordUser, ":***@")));
  // No server on the port.
  const absl::Status refused =
      PostgresMetadataStore::Open(absl::StrCat("postgres://u:", kSecret,
                                               "@127.0.0.1:", PickFreePort(),
                                               "/db?password=", kSecret))
          .status();
  EXPECT_THAT(refused,
              StatusIs(absl::StatusCode::kUnavailable, "cannot connect"));
  // An unknown database.
  const absl::Status unknown =
      PostgresMetadataStore::Open(absl::StrCat("postgres://",
                                               PostgresServer::kUser, ":",
                                               kSecret, "@", host, "/nodb"))
          .status();
  EXPECT_THAT(unknown, StatusIs(absl::StatusCode::kUnavailable, "nodb"));
  for (const absl::Status& status : {wrong, refused, unknown}) {
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr(kDecodedSecret)));
    EXPECT_THAT(std::string(status.message()), Not(HasSubstr("s3cr")));
  }
  // The right one, in the URI percent-encoded.
  std::string encoded = PostgresServer::kPasswordUserPassword;
  absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> store =
      PostgresMetadataStore::Open(
          absl::StrCat("postgres://", PostgresServer::kPasswordUser, ":",
                       encoded, "@", host, "/password_test"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->redacted_uri(),
            absl::StrCat("postgres://", PostgresServer::kPasswordUser, ":***@",
                         host, "/password_test"));
}

TEST(PostgresMetadataStoreTest, AnotherApplicationsDatabaseIsRefused) {
  PostgresServer* server = PostgresEnvironment::server();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->CreateDatabase("foreign_db").ok());
  ASSERT_TRUE(server->Exec("foreign_db", "CREATE TABLE orders (id INT)").ok());
  EXPECT_THAT(
      PostgresMetadataStore::Open(server->Uri("foreign_db")).status(),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "is not a bnn-serve metadata database: its schema holds 1 "
               "tables"));
}

// Replicas starting together on an empty database: one migrates, the
// others wait for it and find the schema current.
TEST(PostgresMetadataStoreTest, ReplicasMigrateAnEmptyDatabaseOnce) {
  PostgresServer* server = PostgresEnvironment::server();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->CreateDatabase("together").ok());
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> store =
          PostgresMetadataStore::Open(server->Uri("together"));
      EXPECT_TRUE(store.ok()) << store.status();
      if (store.ok()) ++opened;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(opened.load(), 4);
  absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> store =
      PostgresMetadataStore::Open(server->Uri("together"));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->SchemaVersion(),
            PostgresMetadataStore::SchemaVersionOfBuild());
  // Exactly one row, at the build's version.
  EXPECT_TRUE(
      server
          ->Exec("together",
                 absl::StrCat("DO $$ BEGIN IF (SELECT COUNT(*) FROM "
                              "bnn_metadata_schema WHERE version = ",
                              PostgresMetadataStore::SchemaVersionOfBuild(),
                              ") <> 1 THEN RAISE EXCEPTION 'bad "
                              "schema row'; END IF; END $$"))
          .ok());
}

// Two stores on one database are two replicas: a commit on one is seen by
// the next transaction on the other, and Commits() tells every cache to
// look again.
TEST(PostgresMetadataStoreTest, ReplicasSeeEachOthersCommitsAtOnce) {
  PostgresServer* server = PostgresEnvironment::server();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->CreateDatabase("replicas").ok());
  absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> a =
      PostgresMetadataStore::Open(server->Uri("replicas"));
  absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> b =
      PostgresMetadataStore::Open(server->Uri("replicas"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  SnapshotRecord snapshot;
  snapshot.meta.set_snapshot_id("snap-1");
  snapshot.meta.set_dataset_id("ds-1");
  snapshot.meta.set_method("slang");
  snapshot.payload_blob = std::string(64, 'a');
  ASSERT_TRUE((*a)->Write([&](MetadataTransaction& t) -> absl::Status {
                    BNN_RETURN_IF_ERROR(t.CreateSnapshot(snapshot));
                    BNN_RETURN_IF_ERROR(
                        t.PublishModelVersion("m", "snap-1", 1).status());
                    BNN_RETURN_IF_ERROR(
                        t.PublishModelVersion("m", "snap-1", 2).status());
                    return t.SetAlias("m", "stable", 1, 2).status();
                  })
                  .ok());
  for (int64_t version : {2, 1, 2}) {
    const uint64_t before = (*b)->Commits();
    ASSERT_TRUE((*a)->Write([&](MetadataTransaction& t) {
                      return t.SetAlias("m", "stable", version, 3).status();
                    })
                    .ok());
    EXPECT_NE((*b)->Commits(), before);
    absl::StatusOr<store::ModelAlias> alias = (*b)->Read(
        [&](MetadataReader& r) { return r.GetAlias("m", "stable"); });
    ASSERT_TRUE(alias.ok()) << alias.status();
    EXPECT_EQ(alias->version(), version);
  }
}

// The server ends the connection (a restart, an administrator): the
// transaction using it fails with Unavailable, the next one reconnects.
TEST(PostgresMetadataStoreTest, DroppedConnectionIsUnavailableThenReopened) {
  PostgresServer* server = PostgresEnvironment::server();
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(server->CreateDatabase("dropped").ok());
  PostgresMetadataStore::Options options;
  options.connections = 1;
  absl::StatusOr<std::unique_ptr<PostgresMetadataStore>> store =
      PostgresMetadataStore::Open(server->Uri("dropped"), options);
  ASSERT_TRUE(store.ok()) << store.status();
  const auto count = [&] {
    return (*store)->Read([](MetadataReader& r) { return r.CountModels(); });
  };
  ASSERT_TRUE(count().ok());
  ASSERT_TRUE(server
                  ->Exec("postgres",
                         "SELECT pg_terminate_backend(pid) FROM "
                         "pg_stat_activity WHERE datname = 'dropped'")
                  .ok());
  EXPECT_THAT(count().status(), StatusIs(absl::StatusCode::kUnavailable,
                                         "postgres://bnn@127.0.0.1"));
  absl::StatusOr<int64_t> again = count();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, 0);
}

const ::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

}  // namespace
}  // namespace bnn::server
