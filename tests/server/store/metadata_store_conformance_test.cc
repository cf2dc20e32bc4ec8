// The MetadataStore contract (metadata_store.h), every case run on each
// backend: SQLite (a database file in a temporary directory) and PostgreSQL
// (a database of its own per test on the binary's one real server,
// tests/test_util/postgres_server.h). Every operation of every kind,
// uniqueness, paging, all-or-nothing transactions, reopening, schema
// versions, corrupt rows and concurrent use. What only one backend has
// (SQLite's foreign files, PostgreSQL's URIs, passwords and replicas) is in
// sqlite_metadata_store_test.cc and postgres_metadata_store_test.cc.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sqlite3.h>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/time/clock.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/status.h"

#include "server/store/job_store.h"
#include "server/store/metadata_store.h"
#include "server/store/postgres_metadata_store.h"
#include "server/store/sqlite_metadata_store.h"
#include "tests/server/server_test_util.h"
#include "tests/test_util/postgres_server.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::EqualsProto;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::bnn::testing::PostgresEnvironment;
using ::bnn::testing::PostgresServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using State = store::JobRecord::State;

std::string Id(absl::string_view prefix, int i) {
  return absl::StrFormat("%s-%016x", prefix, i);
}
std::string Blob(int i) { return absl::StrFormat("%064x", i); }

DatasetVersionRecord DatasetVersion(int i, int64_t version,
                                    absl::string_view name = "") {
  DatasetVersionRecord record;
  record.meta.set_dataset_id(Id("ds", i));
  record.meta.set_version(version);
  record.meta.set_name(std::string(name));
  record.meta.set_task("regression");
  record.meta.set_num_rows(10 * version);
  record.meta.set_num_features(3);
  record.meta.add_feature_names("a");
  record.meta.set_created_unix_ms(1000 + i);
  record.rows_blob = Blob(100 * i + static_cast<int>(version));
  return record;
}

SnapshotRecord Snapshot(int i, absl::string_view dataset_id = "ds-1",
                        absl::string_view method = "slang") {
  SnapshotRecord record;
  record.meta.set_snapshot_id(Id("snap", i));
  record.meta.set_dataset_id(std::string(dataset_id));
  record.meta.set_method(std::string(method));
  (*record.meta.mutable_params())["rank"] = "2";
  record.meta.set_created_unix_ms(5000 + i);
  record.payload_blob = Blob(9000 + i);
  return record;
}

store::JobRecord Job(int i, State state = store::JobRecord::QUEUED,
                     absl::string_view dataset_id = "ds-1",
                     absl::string_view method = "slang",
                     absl::string_view model_name = "") {
  store::JobRecord job;
  job.set_job_id(Id("job", i));
  job.set_state(state);
  job.set_dataset_id(std::string(dataset_id));
  job.set_method(std::string(method));
  job.set_model_name(std::string(model_name));
  (*job.mutable_params())["rank"] = "2";
  job.set_created_unix_ms(7000 + i);
  return job;
}

JobFilter Filter(std::vector<State> states, absl::string_view dataset_id = "",
                 absl::string_view method = "",
                 absl::string_view model_name = "") {
  JobFilter filter;
  filter.states = std::move(states);
  filter.dataset_id = std::string(dataset_id);
  filter.method = std::string(method);
  filter.model_name = std::string(model_name);
  return filter;
}

// A backend's database for one test, and direct access to it as another
// process would have.
class Backend {
 public:
  virtual ~Backend() = default;
  // Opens the test's store; every call opens the same database.
  virtual absl::StatusOr<std::unique_ptr<MetadataStore>> Open() = 0;
  virtual int SchemaVersionOfBuild() const = 0;
  // Runs `sql` on the database directly.
  virtual void Exec(const std::string& sql) = 0;
  // Marks the database as written by a server of schema `version`.
  virtual void SetSchemaVersion(int version) = 0;
  // Flips one bit of the payload of the row of `table` whose `key` is `id`
  // at byte `offset`, as a bad disk would.
  virtual void FlipPayloadBit(const std::string& table, const std::string& key,
                              const std::string& id, int offset) = 0;
  // The SQL literal of a one-byte payload 0x00.
  virtual std::string OneZeroByte() const = 0;
};

class SqliteBackend final : public Backend {
 public:
  absl::StatusOr<std::unique_ptr<MetadataStore>> Open() override {
    BNN_ASSIGN_OR_RETURN(std::unique_ptr<SqliteMetadataStore> store,
                         SqliteMetadataStore::Open(path()));
    return std::unique_ptr<MetadataStore>(std::move(store));
  }
  int SchemaVersionOfBuild() const override {
    return SqliteMetadataStore::SchemaVersionOfBuild();
  }
  void Exec(const std::string& sql) override {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    const int code = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(code, SQLITE_OK) << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }
  void SetSchemaVersion(int version) override {
    Exec(absl::StrCat("PRAGMA user_version = ", version));
  }
  void FlipPayloadBit(const std::string& table, const std::string& key,
                      const std::string& id, int offset) override {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path().c_str(), &db), SQLITE_OK);
    sqlite3_stmt* select = nullptr;
    const std::string where = absl::StrCat(" WHERE ", key, " = ?");
    ASSERT_EQ(
        sqlite3_prepare_v2(db, ("SELECT payload FROM " + table + where).c_str(),
                           -1, &select, nullptr),
        SQLITE_OK);
    sqlite3_bind_text(select, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    ASSERT_EQ(sqlite3_step(select), SQLITE_ROW);
    std::string payload(
        static_cast<const char*>(sqlite3_column_blob(select, 0)),
        sqlite3_column_bytes(select, 0));
    sqlite3_finalize(select);
    ASSERT_LT(offset, static_cast<int>(payload.size()));
    payload[offset] ^= 1;
    sqlite3_stmt* update = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(
                  db, ("UPDATE " + table + " SET payload = ?" + where).c_str(),
                  -1, &update, nullptr),
              SQLITE_OK);
    sqlite3_bind_blob(update, 1, payload.data(),
                      static_cast<int>(payload.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(update, 2, id.c_str(), -1, SQLITE_TRANSIENT);
    EXPECT_EQ(sqlite3_step(update), SQLITE_DONE);
    sqlite3_finalize(update);
    sqlite3_close(db);
  }
  std::string OneZeroByte() const override { return "x'00'"; }

 private:
  std::string path() const { return dir_.path() + "/metadata.db"; }

  TempDir dir_;
};

class PostgresBackend final : public Backend {
 public:
  // A new database on the binary's server.
  PostgresBackend() {
    static std::atomic<int> databases{0};
    database_ = absl::StrCat("conformance_", databases.fetch_add(1));
    server_ = PostgresEnvironment::server();
    if (server_ == nullptr) return;
    const absl::Status created = server_->CreateDatabase(database_);
    EXPECT_TRUE(created.ok()) << created;
  }
  absl::StatusOr<std::unique_ptr<MetadataStore>> Open() override {
    if (server_ == nullptr) {
      return absl::FailedPreconditionError("the PostgreSQL server is down");
    }
    BNN_ASSIGN_OR_RETURN(std::unique_ptr<PostgresMetadataStore> store,
                         PostgresMetadataStore::Open(server_->Uri(database_)));
    return std::unique_ptr<MetadataStore>(std::move(store));
  }
  int SchemaVersionOfBuild() const override {
    return PostgresMetadataStore::SchemaVersionOfBuild();
  }
  void Exec(const std::string& sql) override {
    ASSERT_NE(server_, nullptr);
    const absl::Status status = server_->Exec(database_, sql);
    EXPECT_TRUE(status.ok()) << status;
  }
  void SetSchemaVersion(int version) override {
    Exec(absl::StrCat("UPDATE bnn_metadata_schema SET version = ", version));
  }
  void FlipPayloadBit(const std::string& table, const std::string& key,
                      const std::string& id, int offset) override {
    Exec(absl::StrCat("UPDATE ", table, " SET payload = set_byte(payload, ",
                      offset, ", get_byte(payload, ", offset, ") # 1) WHERE ",
                      key, " = '", id, "'"));
  }
  std::string OneZeroByte() const override { return "'\\x00'::bytea"; }

 private:
  PostgresServer* server_ = nullptr;
  std::string database_;
};

enum class BackendKind { kSqlite, kPostgres };

class MetadataStoreConformanceTest
    : public ::testing::TestWithParam<BackendKind> {
 protected:
  MetadataStoreConformanceTest() {
    if (GetParam() == BackendKind::kSqlite) {
      backend_ = std::make_unique<SqliteBackend>();
    } else {
      backend_ = std::make_unique<PostgresBackend>();
    }
  }

  std::unique_ptr<MetadataStore> Open() {
    absl::StatusOr<std::unique_ptr<MetadataStore>> store = backend_->Open();
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  std::unique_ptr<Backend> backend_;
};

TEST_P(MetadataStoreConformanceTest, DatasetsAndVersions) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->SchemaVersion(), backend_->SchemaVersionOfBuild());
  const DatasetVersionRecord v1 = DatasetVersion(1, 1, "houses");
  const DatasetVersionRecord v2 = DatasetVersion(1, 2, "houses");
  ASSERT_TRUE(
      store->Write([&](MetadataTransaction& t) { return t.CreateDataset(v1); })
          .ok());
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.AddDatasetVersion(v2);
                  })
                  .ok());
  store
      ->Read([&](MetadataReader& r) {
        absl::StatusOr<DatasetVersionRecord> latest = r.GetDataset(Id("ds", 1));
        EXPECT_TRUE(latest.ok()) << latest.status();
        EXPECT_THAT(latest->meta, EqualsProto(v2.meta));
        EXPECT_EQ(latest->rows_blob, v2.rows_blob);
        absl::StatusOr<DatasetVersionRecord> first =
            r.GetDataset(Id("ds", 1), 1);
        EXPECT_THAT(first->meta, EqualsProto(v1.meta));
        EXPECT_EQ(first->rows_blob, v1.rows_blob);
        absl::StatusOr<DatasetVersionRecord> named =
            r.GetDatasetByName("houses");
        EXPECT_THAT(named->meta, EqualsProto(v2.meta));
        absl::StatusOr<std::vector<DatasetVersionRecord>> versions =
            r.ListDatasetVersions(Id("ds", 1));
        EXPECT_THAT(*versions, SizeIs(2));
        EXPECT_EQ((*versions)[0].meta.version(), 1);
        EXPECT_EQ((*versions)[1].meta.version(), 2);
        EXPECT_THAT(r.GetDataset(Id("ds", 1), 3).status(),
                    StatusIs(absl::StatusCode::kNotFound,
                             absl::StrCat(Id("ds", 1), " version 3")));
        EXPECT_THAT(r.GetDataset(Id("ds", 2)).status(),
                    StatusIs(absl::StatusCode::kNotFound, Id("ds", 2)));
        EXPECT_THAT(r.GetDatasetByName("nope").status(),
                    StatusIs(absl::StatusCode::kNotFound, "'nope'"));
        EXPECT_THAT(r.GetDatasetByName("").status(),
                    StatusIs(absl::StatusCode::kNotFound, "no dataset"));
        absl::StatusOr<absl::flat_hash_set<std::string>> blobs =
            r.ReferencedBlobs();
        EXPECT_TRUE(blobs->contains(v1.rows_blob));
        EXPECT_TRUE(blobs->contains(v2.rows_blob));
        EXPECT_EQ(r.IsBlobReferenced(v2.rows_blob).value_or(false), true);
        EXPECT_EQ(r.IsBlobReferenced(std::string(64, 'f')).value_or(true),
                  false);
        return absl::OkStatus();
      })
      .IgnoreError();

  // A version must follow the latest one.
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.AddDatasetVersion(DatasetVersion(1, 4, "houses"));
  }),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "version 4 cannot follow version 2"));
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.AddDatasetVersion(DatasetVersion(1, 2, "houses"));
  }),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "version 2 cannot follow version 2"));
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.AddDatasetVersion(DatasetVersion(5, 2));
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("ds", 5)));
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.CreateDataset(DatasetVersion(6, 2));
  }),
              StatusIs(absl::StatusCode::kInvalidArgument, "version 1"));

  // Deleting removes every version.
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.DeleteDataset(Id("ds", 1));
                  })
                  .ok());
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetDataset(Id("ds", 1), 1).status();
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("ds", 1)));
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.DeleteDataset(Id("ds", 1));
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("ds", 1)));
  // ... and frees its name.
  EXPECT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.CreateDataset(DatasetVersion(2, 1, "houses"));
                  })
                  .ok());
}

TEST_P(MetadataStoreConformanceTest, DatasetIdsAndNamesAreUnique) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.CreateDataset(DatasetVersion(1, 1, "houses"));
                  })
                  .ok());
  EXPECT_THAT(
      store->Write([&](MetadataTransaction& t) {
        return t.CreateDataset(DatasetVersion(2, 1, "houses"));
      }),
      StatusIs(absl::StatusCode::kAlreadyExists,
               absl::StrCat("dataset name 'houses' is taken by dataset ",
                            Id("ds", 1))));
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.CreateDataset(DatasetVersion(1, 1, "other"));
  }),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       absl::StrCat("dataset ", Id("ds", 1), " already")));
  // Unnamed datasets do not collide.
  EXPECT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(t.CreateDataset(DatasetVersion(3, 1)));
                    return t.CreateDataset(DatasetVersion(4, 1));
                  })
                  .ok());
}

TEST_P(MetadataStoreConformanceTest, Snapshots) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(t.CreateSnapshot(Snapshot(1, "ds-a")));
                    BNN_RETURN_IF_ERROR(t.CreateSnapshot(Snapshot(2, "ds-b")));
                    return t.CreateSnapshot(Snapshot(3, "ds-a", "bbb"));
                  })
                  .ok());
  absl::StatusOr<SnapshotRecord> got = store->Read(
      [&](MetadataReader& r) { return r.GetSnapshot(Id("snap", 2)); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->meta, EqualsProto(Snapshot(2, "ds-b").meta));
  EXPECT_EQ(got->payload_blob, Blob(9002));

  const auto ids = [&](const SnapshotFilter& filter) {
    std::vector<std::string> result;
    absl::StatusOr<Page<SnapshotRecord>> page =
        store->Read([&](MetadataReader& r) {
          return r.ListSnapshots(filter, PageRequest());
        });
    EXPECT_TRUE(page.ok()) << page.status();
    for (const SnapshotRecord& s : page->items) {
      result.push_back(s.meta.snapshot_id());
    }
    return result;
  };
  EXPECT_THAT(ids({}),
              ElementsAre(Id("snap", 3), Id("snap", 2), Id("snap", 1)));
  EXPECT_THAT(ids({"ds-a", ""}), ElementsAre(Id("snap", 3), Id("snap", 1)));
  EXPECT_THAT(ids({"", "slang"}), ElementsAre(Id("snap", 2), Id("snap", 1)));
  EXPECT_THAT(ids({"ds-a", "slang"}), ElementsAre(Id("snap", 1)));

  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.CreateSnapshot(Snapshot(1));
  }),
              StatusIs(absl::StatusCode::kAlreadyExists, Id("snap", 1)));
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.DeleteSnapshot(Id("snap", 1));
                  })
                  .ok());
  EXPECT_THAT(ids({}), ElementsAre(Id("snap", 3), Id("snap", 2)));
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.DeleteSnapshot(Id("snap", 1));
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("snap", 1)));
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetSnapshot(Id("snap", 1)).status();
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("snap", 1)));
}

TEST_P(MetadataStoreConformanceTest, JobsWithFilters) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(t.CreateJob(Job(1)));
                    BNN_RETURN_IF_ERROR(t.CreateJob(
                        Job(2, store::JobRecord::RUNNING, "ds-2", "bbb", "m")));
                    BNN_RETURN_IF_ERROR(t.CreateJob(
                        Job(3, store::JobRecord::FAILED, "ds-1", "bbb")));
                    return t.CreateJob(
                        Job(4, store::JobRecord::QUEUED, "ds-2", "slang", "m"));
                  })
                  .ok());
  const auto ids = [&](const JobFilter& filter) {
    std::vector<std::string> result;
    absl::StatusOr<Page<store::JobRecord>> page = store->Read(
        [&](MetadataReader& r) { return r.ListJobs(filter, PageRequest()); });
    EXPECT_TRUE(page.ok()) << page.status();
    for (const store::JobRecord& job : page->items) {
      result.push_back(job.job_id());
    }
    return result;
  };
  EXPECT_THAT(ids({}), ElementsAre(Id("job", 4), Id("job", 3), Id("job", 2),
                                   Id("job", 1)));
  EXPECT_THAT(ids(Filter({store::JobRecord::QUEUED})),
              ElementsAre(Id("job", 4), Id("job", 1)));
  EXPECT_THAT(
      ids(Filter({store::JobRecord::RUNNING, store::JobRecord::FAILED})),
      ElementsAre(Id("job", 3), Id("job", 2)));
  EXPECT_THAT(ids(Filter({}, "ds-2")), ElementsAre(Id("job", 4), Id("job", 2)));
  EXPECT_THAT(ids(Filter({}, "", "bbb")),
              ElementsAre(Id("job", 3), Id("job", 2)));
  EXPECT_THAT(ids(Filter({}, "", "", "m")),
              ElementsAre(Id("job", 4), Id("job", 2)));
  EXPECT_THAT(ids(Filter({store::JobRecord::QUEUED}, "ds-2", "slang", "m")),
              ElementsAre(Id("job", 4)));
  EXPECT_THAT(ids(Filter({store::JobRecord::CANCELLED})), IsEmpty());

  // Updates replace the record and its columns.
  store::JobRecord done = Job(1, store::JobRecord::SUCCEEDED);
  done.set_snapshot_id("snap-x");
  done.set_model_name("m");
  ASSERT_TRUE(
      store->Write([&](MetadataTransaction& t) { return t.UpdateJob(done); })
          .ok());
  EXPECT_THAT(
      *store->Read([&](MetadataReader& r) { return r.GetJob(Id("job", 1)); }),
      EqualsProto(done));
  EXPECT_THAT(ids(Filter({store::JobRecord::QUEUED})),
              ElementsAre(Id("job", 4)));
  EXPECT_THAT(ids(Filter({}, "", "", "m")),
              ElementsAre(Id("job", 4), Id("job", 2), Id("job", 1)));
  EXPECT_THAT(
      store->Write([&](MetadataTransaction& t) { return t.UpdateJob(Job(9)); }),
      StatusIs(absl::StatusCode::kNotFound, Id("job", 9)));
  EXPECT_THAT(
      store->Write([&](MetadataTransaction& t) { return t.CreateJob(Job(2)); }),
      StatusIs(absl::StatusCode::kAlreadyExists, Id("job", 2)));

  // A deleted job is gone; its id can be used again.
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(t.DeleteJob(Id("job", 2)));
                    return t.CreateJob(Job(2));
                  })
                  .ok());
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.DeleteJob(Id("job", 9));
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("job", 9)));
}

TEST_P(MetadataStoreConformanceTest, ModelsVersionsAndAliases) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    for (int i = 1; i <= 3; ++i) {
                      BNN_RETURN_IF_ERROR(t.CreateSnapshot(Snapshot(i)));
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  for (int i = 1; i <= 3; ++i) {
    absl::StatusOr<store::ModelVersion> version =
        store->Write([&](MetadataTransaction& t) {
          return t.PublishModelVersion("m", Id("snap", i), 100 * i);
        });
    ASSERT_TRUE(version.ok()) << version.status();
    EXPECT_EQ(version->version(), i);
    EXPECT_EQ(version->snapshot_id(), Id("snap", i));
  }
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.PublishModelVersion("m", Id("snap", 9), 1).status();
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("snap", 9)));
  absl::StatusOr<store::ModelInfo> model =
      store->Read([&](MetadataReader& r) { return r.GetModel("m"); });
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->next_version(), 4);
  EXPECT_EQ(model->created_unix_ms(), 100);
  EXPECT_EQ(model->updated_unix_ms(), 300);

  // Aliases point at versions, move, and protect their version.
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(
                        t.SetAlias("m", "latest", 3, 1).status());
                    return t.SetAlias("m", "stable", 2, 1).status();
                  })
                  .ok());
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.DeleteModelVersion("m", 2);
  }),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "version 2 is the target of alias stable"));
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.SetAlias("m", "stable", 7, 1).status();
  }),
              StatusIs(absl::StatusCode::kNotFound, "has no version 7"));
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.SetAlias("m", "stable", 1, 2).status();
                  })
                  .ok());
  absl::StatusOr<store::ModelAlias> stable =
      store->Read([&](MetadataReader& r) { return r.GetAlias("m", "stable"); });
  ASSERT_TRUE(stable.ok());
  EXPECT_EQ(stable->version(), 1);
  EXPECT_EQ(stable->updated_unix_ms(), 2);
  absl::StatusOr<std::vector<store::ModelAlias>> aliases =
      store->Read([&](MetadataReader& r) { return r.ListAliases("m"); });
  ASSERT_THAT(*aliases, SizeIs(2));
  EXPECT_EQ((*aliases)[0].alias(), "latest");
  EXPECT_EQ((*aliases)[1].alias(), "stable");

  // A deleted version's number is never reused.
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.DeleteModelVersion("m", 2);
                  })
                  .ok());
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetModelVersion("m", 2).status();
  }),
              StatusIs(absl::StatusCode::kNotFound, "'m' has no version 2"));
  absl::StatusOr<store::ModelVersion> v4 =
      store->Write([&](MetadataTransaction& t) {
        return t.PublishModelVersion("m", Id("snap", 2), 400);
      });
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->version(), 4);
  absl::StatusOr<Page<store::ModelVersion>> versions =
      store->Read([&](MetadataReader& r) {
        return r.ListModelVersions("m", PageRequest());
      });
  ASSERT_TRUE(versions.ok()) << versions.status();
  std::vector<int64_t> numbers;
  for (const store::ModelVersion& v : versions->items) {
    numbers.push_back(v.version());
  }
  EXPECT_THAT(numbers, ElementsAre(4, 3, 1));

  // A published snapshot cannot be deleted.
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.DeleteSnapshot(Id("snap", 2));
  }),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "is published as model m:4"));
  absl::StatusOr<std::vector<store::ModelVersion>> of_snapshot =
      store->Read([&](MetadataReader& r) {
        return r.ListVersionsOfSnapshot(Id("snap", 3));
      });
  ASSERT_THAT(*of_snapshot, SizeIs(1));
  EXPECT_EQ((*of_snapshot)[0].version(), 3);

  // Unknown models and aliases.
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetAlias("m", "nope").status();
  }),
              StatusIs(absl::StatusCode::kNotFound, "has no alias 'nope'"));
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetAlias("x", "stable").status();
  }),
              StatusIs(absl::StatusCode::kNotFound, "model 'x' not found"));
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.ListModelVersions("x", PageRequest()).status();
  }),
              StatusIs(absl::StatusCode::kNotFound, "model 'x'"));
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.DeleteAlias("m", "stable");
                  })
                  .ok());
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return t.DeleteAlias("m", "stable");
  }),
              StatusIs(absl::StatusCode::kNotFound, "no alias 'stable'"));

  // Deleting the model deletes its versions and aliases, not snapshots.
  ASSERT_TRUE(
      store->Write([&](MetadataTransaction& t) { return t.DeleteModel("m"); })
          .ok());
  EXPECT_THAT(
      store->Read([&](MetadataReader& r) { return r.GetModel("m").status(); }),
      StatusIs(absl::StatusCode::kNotFound, "'m'"));
  EXPECT_THAT(*store->Read([&](MetadataReader& r) {
    return r.ListVersionsOfSnapshot(Id("snap", 3));
  }),
              IsEmpty());
  EXPECT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.DeleteSnapshot(Id("snap", 2));
                  })
                  .ok());
  EXPECT_THAT(
      store->Write([&](MetadataTransaction& t) { return t.DeleteModel("m"); }),
      StatusIs(absl::StatusCode::kNotFound, "'m'"));
}

// Pages of 7 through 250 records (creation times with ties, so that the id
// orders within a millisecond) give each record once, newest first.
TEST_P(MetadataStoreConformanceTest, PagingGivesEachRecordOnceInOrder) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  constexpr int kCount = 250;
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    for (int i = 0; i < kCount; ++i) {
                      store::JobRecord job = Job(i);
                      job.set_created_unix_ms(1000 + i / 3);
                      BNN_RETURN_IF_ERROR(t.CreateJob(job));
                      SnapshotRecord snapshot = Snapshot(i);
                      snapshot.meta.set_created_unix_ms(1000 + i / 4);
                      BNN_RETURN_IF_ERROR(t.CreateSnapshot(snapshot));
                      DatasetVersionRecord dataset = DatasetVersion(i, 1);
                      dataset.meta.set_created_unix_ms(1000 + i / 5);
                      BNN_RETURN_IF_ERROR(t.CreateDataset(dataset));
                      BNN_RETURN_IF_ERROR(
                          t.PublishModelVersion(absl::StrCat("model-", i % 2),
                                                Id("snap", i), 1000 + i)
                              .status());
                    }
                    return absl::OkStatus();
                  })
                  .ok());

  // Pages through a list with `list_page`; returns the ids in page order.
  const auto page_through = [&](auto list_page, auto id_of) {
    std::vector<std::string> seen;
    PageRequest request;
    request.page_size = 7;
    int pages = 0;
    while (true) {
      auto page =
          store->Read([&](MetadataReader& r) { return list_page(r, request); });
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      EXPECT_LE(page->items.size(), 7u);
      for (const auto& item : page->items) seen.push_back(id_of(item));
      ++pages;
      if (page->next_page_token.empty()) break;
      request.page_token = page->next_page_token;
    }
    return std::make_pair(seen, pages);
  };
  std::vector<std::string> newest_first;
  for (int i = kCount - 1; i >= 0; --i) newest_first.push_back(Id("job", i));
  auto [jobs, job_pages] = page_through(
      [](MetadataReader& r, const PageRequest& p) { return r.ListJobs({}, p); },
      [](const store::JobRecord& job) { return job.job_id(); });
  EXPECT_EQ(jobs, newest_first);
  EXPECT_EQ(job_pages, (kCount + 6) / 7);

  newest_first.clear();
  for (int i = kCount - 1; i >= 0; --i) newest_first.push_back(Id("snap", i));
  EXPECT_EQ(
      page_through([](MetadataReader& r,
                      const PageRequest& p) { return r.ListSnapshots({}, p); },
                   [](const SnapshotRecord& s) { return s.meta.snapshot_id(); })
          .first,
      newest_first);

  newest_first.clear();
  for (int i = kCount - 1; i >= 0; --i) newest_first.push_back(Id("ds", i));
  EXPECT_EQ(page_through([](MetadataReader& r,
                            const PageRequest& p) { return r.ListDatasets(p); },
                         [](const DatasetVersionRecord& d) {
                           return d.meta.dataset_id();
                         })
                .first,
            newest_first);

  newest_first.clear();
  for (int v = kCount / 2; v >= 1; --v) newest_first.push_back(absl::StrCat(v));
  EXPECT_EQ(page_through(
                [](MetadataReader& r, const PageRequest& p) {
                  return r.ListModelVersions("model-1", p);
                },
                [](const store::ModelVersion& v) {
                  return absl::StrCat(v.version());
                })
                .first,
            newest_first);

  // Models by name, after a name.
  const auto model_names = [&](absl::string_view after, int limit) {
    std::vector<std::string> names;
    const absl::StatusOr<std::vector<store::ModelInfo>> models = store->Read(
        [&](MetadataReader& r) { return r.ListModels(after, limit); });
    EXPECT_TRUE(models.ok()) << models.status();
    if (!models.ok()) return names;
    for (const store::ModelInfo& m : *models) {
      names.push_back(m.name());
    }
    return names;
  };
  EXPECT_THAT(model_names("", 10), ElementsAre("model-0", "model-1"));
  EXPECT_THAT(model_names("", 1), ElementsAre("model-0"));
  EXPECT_THAT(model_names("model-0", 10), ElementsAre("model-1"));
  EXPECT_EQ(*store->Read([](MetadataReader& r) { return r.CountModels(); }), 2);

  // A filtered list pages too.
  EXPECT_THAT(page_through(
                  [](MetadataReader& r, const PageRequest& p) {
                    return r.ListJobs(
                        Filter({store::JobRecord::QUEUED}, "ds-1"), p);
                  },
                  [](const store::JobRecord& job) { return job.job_id(); })
                  .first,
              SizeIs(kCount));
}

TEST_P(MetadataStoreConformanceTest, BadPageRequestsAreInvalidArgument) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(t.CreateJob(Job(1)));
                    return t.CreateJob(Job(2));
                  })
                  .ok());
  PageRequest request;
  request.page_size = 0;
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.ListJobs({}, request).status();
  }),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "page_size: must be in [1, 1000], got 0"));
  request.page_size = kMaxPageSize + 1;
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.ListJobs({}, request).status();
  }),
              StatusIs(absl::StatusCode::kInvalidArgument, "page_size"));
  request.page_size = 1;
  absl::StatusOr<Page<store::JobRecord>> first =
      store->Read([&](MetadataReader& r) { return r.ListJobs({}, request); });
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->next_page_token.empty());
  // A job list's token is no snapshot list's, and garbage is no token.
  request.page_token = first->next_page_token;
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.ListSnapshots({}, request).status();
  }),
              StatusIs(absl::StatusCode::kInvalidArgument, "page_token"));
  request.page_token = "not a token!";
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.ListJobs({}, request).status();
  }),
              StatusIs(absl::StatusCode::kInvalidArgument, "page_token"));
}

// "Mark the job SUCCEEDED, add its snapshot, publish it, move latest" is one
// transaction: a failure at any step leaves nothing of the others.
TEST_P(MetadataStoreConformanceTest, TransactionIsAllOrNothing) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(t.CreateJob(Job(1)));
                    return t.CreateSnapshot(Snapshot(7));
                  })
                  .ok());
  const auto finish = [&](MetadataTransaction& t,
                          const std::string& snapshot_id) -> absl::Status {
    store::JobRecord job = Job(1, store::JobRecord::SUCCEEDED);
    job.set_snapshot_id(Id("snap", 1));
    BNN_RETURN_IF_ERROR(t.UpdateJob(job));
    BNN_RETURN_IF_ERROR(t.CreateSnapshot(Snapshot(1)));
    BNN_ASSIGN_OR_RETURN(const store::ModelVersion version,
                         t.PublishModelVersion("m", snapshot_id, 10));
    return t.SetAlias("m", "latest", version.version(), 10).status();
  };
  // Fails at the publish (unknown snapshot) after three writes.
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) {
    return finish(t, Id("snap", 9));
  }),
              StatusIs(absl::StatusCode::kNotFound, Id("snap", 9)));
  // Fails after every step, by the body's own error.
  EXPECT_THAT(store->Write([&](MetadataTransaction& t) -> absl::Status {
    BNN_RETURN_IF_ERROR(finish(t, Id("snap", 1)));
    return absl::AbortedError("the caller changed its mind");
  }),
              StatusIs(absl::StatusCode::kAborted, "changed its mind"));
  ASSERT_TRUE(
      store
          ->Read([&](MetadataReader& r) -> absl::Status {
            BNN_ASSIGN_OR_RETURN(store::JobRecord job, r.GetJob(Id("job", 1)));
            EXPECT_THAT(job, EqualsProto(Job(1)));
            EXPECT_TRUE(
                absl::IsNotFound(r.GetSnapshot(Id("snap", 1)).status()));
            EXPECT_TRUE(absl::IsNotFound(r.GetModel("m").status()));
            return absl::OkStatus();
          })
          .ok());
  // Done right, all of it is there.
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return finish(t, Id("snap", 1));
                  })
                  .ok());
  absl::StatusOr<store::ModelAlias> latest =
      store->Read([&](MetadataReader& r) { return r.GetAlias("m", "latest"); });
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->version(), 1);
}

TEST_P(MetadataStoreConformanceTest, ReopenKeepsEverything) {
  store::JobRecord job = Job(1, store::JobRecord::RUNNING, "ds-1", "bbb", "m");
  job.add_hidden_sizes(50);
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(
        store
            ->Write([&](MetadataTransaction& t) -> absl::Status {
              BNN_RETURN_IF_ERROR(
                  t.CreateDataset(DatasetVersion(1, 1, "houses")));
              BNN_RETURN_IF_ERROR(
                  t.AddDatasetVersion(DatasetVersion(1, 2, "houses")));
              BNN_RETURN_IF_ERROR(t.CreateSnapshot(Snapshot(1)));
              BNN_RETURN_IF_ERROR(t.CreateJob(job));
              BNN_RETURN_IF_ERROR(
                  t.PublishModelVersion("m", Id("snap", 1), 3).status());
              BNN_RETURN_IF_ERROR(t.SetAlias("m", "stable", 1, 3).status());
              return t.SetProperty("origin", "test");
            })
            .ok());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(
      store
          ->Read([&](MetadataReader& r) -> absl::Status {
            BNN_ASSIGN_OR_RETURN(DatasetVersionRecord dataset,
                                 r.GetDatasetByName("houses"));
            EXPECT_THAT(dataset.meta,
                        EqualsProto(DatasetVersion(1, 2, "houses").meta));
            BNN_ASSIGN_OR_RETURN(SnapshotRecord snapshot,
                                 r.GetSnapshot(Id("snap", 1)));
            EXPECT_THAT(snapshot.meta, EqualsProto(Snapshot(1).meta));
            BNN_ASSIGN_OR_RETURN(store::JobRecord got, r.GetJob(Id("job", 1)));
            EXPECT_THAT(got, EqualsProto(job));
            BNN_ASSIGN_OR_RETURN(store::ModelAlias alias,
                                 r.GetAlias("m", "stable"));
            EXPECT_EQ(alias.version(), 1);
            BNN_ASSIGN_OR_RETURN(std::optional<std::string> origin,
                                 r.GetProperty("origin"));
            EXPECT_EQ(origin, "test");
            BNN_ASSIGN_OR_RETURN(std::optional<std::string> unset,
                                 r.GetProperty("unset"));
            EXPECT_EQ(unset, std::nullopt);
            return absl::OkStatus();
          })
          .ok());
}

TEST_P(MetadataStoreConformanceTest, NewerSchemaVersionIsRefusedNamingBoth) {
  ASSERT_NE(Open(), nullptr);
  backend_->SetSchemaVersion(99);
  EXPECT_THAT(backend_->Open().status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("schema version 99, newer than version ",
                                    backend_->SchemaVersionOfBuild())));
}

TEST_P(MetadataStoreConformanceTest, CorruptRowIsDataLossNamingIt) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store
                    ->Write([&](MetadataTransaction& t) {
                      BNN_RETURN_IF_ERROR(t.CreateJob(Job(1)));
                      BNN_RETURN_IF_ERROR(t.CreateJob(Job(2)));
                      BNN_RETURN_IF_ERROR(t.CreateSnapshot(Snapshot(1)));
                      return t.CreateDataset(DatasetVersion(1, 1));
                    })
                    .ok());
  }
  // One bit of the payload flipped (inside the message, after the frame's
  // header).
  backend_->FlipPayloadBit("jobs", "job_id", Id("job", 1), 30);
  // A whole valid payload of another record.
  backend_->Exec(
      absl::StrCat("UPDATE snapshots SET snapshot_id = 'snap-moved' WHERE "
                   "snapshot_id = '",
                   Id("snap", 1), "'"));
  backend_->Exec(absl::StrCat(
      "UPDATE dataset_versions SET payload = ", backend_->OneZeroByte(),
      " WHERE dataset_id = '", Id("ds", 1), "'"));
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetJob(Id("job", 1)).status();
  }),
              StatusIs(absl::StatusCode::kDataLoss,
                       absl::StrCat("job ", Id("job", 1))));
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.ListJobs({}, PageRequest()).status();
  }),
              StatusIs(absl::StatusCode::kDataLoss, Id("job", 1)));
  EXPECT_TRUE(store
                  ->Read([&](MetadataReader& r) {
                    return r.GetJob(Id("job", 2)).status();
                  })
                  .ok());
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetSnapshot("snap-moved").status();
  }),
              StatusIs(absl::StatusCode::kDataLoss,
                       absl::StrCat("snapshot snap-moved: stored record is "
                                    "inconsistent: it holds ",
                                    Id("snap", 1))));
  EXPECT_THAT(store->Read([&](MetadataReader& r) {
    return r.GetDataset(Id("ds", 1)).status();
  }),
              StatusIs(absl::StatusCode::kDataLoss,
                       absl::StrCat("dataset ", Id("ds", 1), " version 1")));
}

// Four threads writing and reading for a second: no errors, every write
// visible afterwards.
TEST_P(MetadataStoreConformanceTest, ConcurrentWritersAndReaders) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> errors{0};
  std::vector<int> written(2, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; !stop.load(); ++i) {
        const int id = w * 1000000 + i;
        const absl::Status status =
            store->Write([&](MetadataTransaction& t) -> absl::Status {
              BNN_RETURN_IF_ERROR(t.CreateJob(Job(id)));
              store::JobRecord running = Job(id, store::JobRecord::RUNNING);
              return t.UpdateJob(running);
            });
        if (!status.ok()) {
          ADD_FAILURE() << status;
          ++errors;
          return;
        }
        written[w] = i + 1;
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        PageRequest page;
        page.page_size = 20;
        const absl::Status status =
            store->Read([&](MetadataReader& reader) -> absl::Status {
              BNN_ASSIGN_OR_RETURN(
                  Page<store::JobRecord> jobs,
                  reader.ListJobs(Filter({store::JobRecord::RUNNING}), page));
              for (const store::JobRecord& job : jobs.items) {
                BNN_RETURN_IF_ERROR(reader.GetJob(job.job_id()).status());
              }
              return absl::OkStatus();
            });
        if (!status.ok()) {
          ADD_FAILURE() << status;
          ++errors;
          return;
        }
      }
    });
  }
  absl::SleepFor(absl::Seconds(1));
  stop = true;
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(written[0], 0);
  EXPECT_GT(written[1], 0);
  PageRequest all;
  all.page_size = kMaxPageSize;
  int total = 0;
  while (true) {
    absl::StatusOr<Page<store::JobRecord>> page =
        store->Read([&](MetadataReader& r) { return r.ListJobs({}, all); });
    ASSERT_TRUE(page.ok()) << page.status();
    total += static_cast<int>(page->items.size());
    if (page->next_page_token.empty()) break;
    all.page_token = page->next_page_token;
  }
  EXPECT_EQ(total, written[0] + written[1]);
}

// The queue (NextClaimableJob): jobs to resume, oldest first, before the
// oldest queued one; a RUNNING or CANCELLING job only once its heartbeat is
// older than the bound; never a finished one.
TEST_P(MetadataStoreConformanceTest, NextClaimableJobResumesFirstThenQueues) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const auto next = [&](int64_t stale_before) -> std::string {
    absl::StatusOr<std::optional<store::JobRecord>> job =
        store->Write([&](MetadataTransaction& t) {
          return t.NextClaimableJob(stale_before);
        });
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() && job->has_value() ? (*job)->job_id() : "";
  };
  EXPECT_EQ(next(1000000), "");
  const auto running = [](int i, State state, int64_t heartbeat) {
    store::JobRecord job = Job(i, state);
    job.set_claimant("p@h:1:1");
    job.set_heartbeat_unix_ms(heartbeat);
    return job;
  };
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    BNN_RETURN_IF_ERROR(t.CreateJob(Job(1)));
                    BNN_RETURN_IF_ERROR(t.CreateJob(Job(2)));
                    BNN_RETURN_IF_ERROR(t.CreateJob(
                        running(3, store::JobRecord::RUNNING, 5000)));
                    BNN_RETURN_IF_ERROR(t.CreateJob(
                        running(4, store::JobRecord::CANCELLING, 6000)));
                    BNN_RETURN_IF_ERROR(
                        t.CreateJob(Job(5, store::JobRecord::INTERRUPTED)));
                    return t.CreateJob(Job(6, store::JobRecord::SUCCEEDED));
                  })
                  .ok());
  // Heartbeats fresh: the interrupted job, then the oldest queued one.
  EXPECT_EQ(next(1000), Id("job", 5));
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.UpdateJob(
                        running(5, store::JobRecord::RUNNING, 9000));
                  })
                  .ok());
  EXPECT_EQ(next(1000), Id("job", 1));
  // Job 3's heartbeat is stale at 5001, job 4's too at 6001 (oldest first).
  EXPECT_EQ(next(5001), Id("job", 3));
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) {
                    return t.UpdateJob(
                        running(3, store::JobRecord::RUNNING, 8000));
                  })
                  .ok());
  EXPECT_EQ(next(6001), Id("job", 4));
  // The heartbeat column follows the record.
  EXPECT_EQ(next(9001), Id("job", 3));
  ASSERT_TRUE(store
                  ->Write([&](MetadataTransaction& t) -> absl::Status {
                    for (int i : {1, 2, 3, 4, 5}) {
                      BNN_RETURN_IF_ERROR(
                          t.UpdateJob(Job(i, store::JobRecord::CANCELLED)));
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(next(1000000), "");
}

// Claims through JobStore from two stores on one database (two processes)
// and several threads each: every job is claimed exactly once, and only
// its claimant's heartbeat is recorded.
TEST_P(MetadataStoreConformanceTest, ConcurrentClaimsTakeEachJobOnce) {
  auto first = Open();
  auto second = Open();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  testutil::TempDir checkpoints;
  absl::StatusOr<std::unique_ptr<JobStore>> a =
      JobStore::Open(first.get(), checkpoints.path(), "srv-a");
  absl::StatusOr<std::unique_ptr<JobStore>> b =
      JobStore::Open(second.get(), checkpoints.path(), "srv-b");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  constexpr int kJobs = 40;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    absl::StatusOr<store::JobRecord> job = (*a)->Create(Job(i));
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->job_id());
  }
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> claims;  // job, claimant
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      JobStore& jobs = t % 2 == 0 ? **a : **b;
      const std::string claimant = absl::StrCat("claimant-", t);
      while (true) {
        absl::StatusOr<std::optional<store::JobRecord>> job =
            jobs.Claim(claimant, absl::Now() - absl::Seconds(30));
        if (!job.ok()) {
          ADD_FAILURE() << job.status();
          return;
        }
        if (!job->has_value()) return;
        EXPECT_EQ((*job)->state(), store::JobRecord::RUNNING);
        EXPECT_EQ((*job)->claimant(), claimant);
        std::lock_guard<std::mutex> lock(mu);
        claims.emplace_back((*job)->job_id(), claimant);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  std::set<std::string> claimed;
  for (const auto& [job, claimant] : claims) {
    EXPECT_TRUE(claimed.insert(job).second) << job << " claimed twice";
  }
  EXPECT_EQ(claimed, std::set<std::string>(ids.begin(), ids.end()));
  // The heartbeat of another claimant changes nothing; the claimant's does.
  const auto& [job, claimant] = claims.front();
  absl::StatusOr<store::JobRecord> other = (*b)->Heartbeat(job, "intruder");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->claimant(), claimant);
  const int64_t before = other->heartbeat_unix_ms();
  absl::SleepFor(absl::Milliseconds(5));
  absl::StatusOr<store::JobRecord> own = (*a)->Heartbeat(job, claimant);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_GT(own->heartbeat_unix_ms(), before);
  // A claim of a RUNNING job with a fresh heartbeat is refused, naming it,
  // as the one refusal that waiting may turn into a claim.
  const absl::Status live =
      (*b)->ClaimJob(job, "other", absl::Now() - absl::Seconds(30)).status();
  EXPECT_THAT(live.message(), HasSubstr("is RUNNING on " + claimant));
  EXPECT_TRUE(IsClaimedByLiveClaimant(live)) << live;
  const absl::Status unknown =
      (*b)->ClaimJob("job-00000000000000ff", "other", absl::Now()).status();
  EXPECT_TRUE(absl::IsNotFound(unknown)) << unknown;
  EXPECT_FALSE(IsClaimedByLiveClaimant(unknown));
  EXPECT_FALSE(
      IsClaimedByLiveClaimant(absl::FailedPreconditionError(live.message())));
  // Stale: taken over.
  absl::StatusOr<store::JobRecord> taken =
      (*b)->ClaimJob(job, "other", absl::Now() + absl::Seconds(1));
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->claimant(), "other");
  EXPECT_EQ(taken->runner(), "srv-b");
  // The old claimant's heartbeat now finds the new one.
  absl::StatusOr<store::JobRecord> lost = (*a)->Heartbeat(job, claimant);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->claimant(), "other");
}

INSTANTIATE_TEST_SUITE_P(Backends, MetadataStoreConformanceTest,
                         ::testing::Values(BackendKind::kSqlite,
                                           BackendKind::kPostgres),
                         [](const ::testing::TestParamInfo<BackendKind>& info) {
                           return info.param == BackendKind::kSqlite
                                      ? "Sqlite"
                                      : "Postgres";
                         });

// One PostgreSQL server for the whole binary.
const ::testing::Environment* const kPostgres =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

}  // namespace
}  // namespace bnn::server
