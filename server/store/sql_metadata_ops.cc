#include "server/store/sql_metadata_ops.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include "bnn/status.h"

namespace bnn::server {

absl::StatusOr<int64_t> SqlConnection::QueryInt(const std::string& sql) {
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<SqlStatement> statement, Prepare(sql));
  BNN_ASSIGN_OR_RETURN(const bool row, statement->Step());
  if (!row) return absl::InternalError(absl::StrCat(sql, ": no result"));
  return statement->Int(0);
}

std::vector<std::string> SchemaSections(absl::string_view schema_sql) {
  constexpr absl::string_view kMigrationMarker = "-- migration ";
  std::vector<std::string> sections;
  for (absl::string_view line : absl::StrSplit(schema_sql, '\n')) {
    if (absl::StartsWith(line, kMigrationMarker)) {
      sections.emplace_back();
    } else if (!sections.empty()) {
      absl::StrAppend(&sections.back(), line, "\n");
    }
  }
  return sections;
}

namespace {

// A list query: a SELECT of (key, id, payload, ...) from constant fragments,
// newest first from a page token's position, one more row than the page to
// tell whether another page follows. Values are bound, never spliced.
class ListQuery {
 public:
  ListQuery(absl::string_view select, absl::string_view key_column,
            absl::string_view id_column)
      : sql_(select), key_column_(key_column), id_column_(id_column) {}

  // `condition` is constant SQL with one "?" per value.
  void Where(absl::string_view condition, std::vector<SqlValue> values) {
    absl::StrAppend(&sql_, has_where_ ? " AND " : " WHERE ", condition);
    has_where_ = true;
    for (SqlValue& value : values) values_.push_back(std::move(value));
  }

  // Adds the position of `token` (if any) and the order and limit.
  absl::Status Finish(absl::string_view list, const PageRequest& page) {
    BNN_RETURN_IF_ERROR(ValidatePageRequest(page));
    if (!page.page_token.empty()) {
      BNN_ASSIGN_OR_RETURN(const store::PageTokenState state,
                           DecodePageToken(list, page.page_token));
      Where(absl::StrCat("(", key_column_, ", ", id_column_, ") < (?, ?)"),
            {state.key(), state.id()});
    }
    absl::StrAppend(&sql_, " ORDER BY ", key_column_, " DESC, ", id_column_,
                    " DESC LIMIT ?");
    values_.push_back(int64_t{page.page_size} + 1);
    return absl::OkStatus();
  }

  const std::string& sql() const { return sql_; }
  const std::vector<SqlValue>& values() const { return values_; }

 private:
  std::string sql_;
  const std::string key_column_;
  const std::string id_column_;
  bool has_where_ = false;
  std::vector<SqlValue> values_;
};

std::string Quoted(absl::string_view text) {
  return absl::StrCat("'", text, "'");
}

// Every operation, on the connection, inside the transaction the store
// opened.
class SqlMetadataOps final : public MetadataTransaction {
  using Statement = std::unique_ptr<SqlStatement>;

 public:
  explicit SqlMetadataOps(SqlConnection* connection) : c_(connection) {}

  // ---- Datasets.

  absl::StatusOr<DatasetVersionRecord> GetDataset(
      absl::string_view dataset_id, std::optional<int64_t> version) override {
    Statement s;
    if (version.has_value()) {
      BNN_ASSIGN_OR_RETURN(
          s, c_->Prepare("SELECT version, rows_blob, payload FROM "
                         "dataset_versions WHERE dataset_id = ? AND "
                         "version = ?"));
      s->Bind(1, dataset_id).Bind(2, *version);
    } else {
      BNN_ASSIGN_OR_RETURN(
          s, c_->Prepare("SELECT v.version, v.rows_blob, v.payload FROM "
                         "datasets d JOIN dataset_versions v ON "
                         "v.dataset_id = d.dataset_id AND v.version = "
                         "d.latest_version WHERE d.dataset_id = ?"));
      s->Bind(1, dataset_id);
    }
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      if (!version.has_value()) {
        return absl::NotFoundError(
            absl::StrCat("dataset ", dataset_id, " not found"));
      }
      return absl::NotFoundError(absl::StrCat(
          "dataset ", dataset_id, " version ", *version, " not found"));
    }
    return DatasetRow(dataset_id, *s);
  }

  absl::StatusOr<DatasetVersionRecord> GetDatasetByName(
      absl::string_view name) override {
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("SELECT dataset_id FROM datasets WHERE "
                                     "name = ?"));
    s->Bind(1, name);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row || name.empty()) {
      return absl::NotFoundError(
          absl::StrCat("no dataset is named ", Quoted(name)));
    }
    const std::string id = s->Text(0);
    s.reset();
    return GetDataset(id, std::nullopt);
  }

  absl::StatusOr<Page<DatasetVersionRecord>> ListDatasets(
      const PageRequest& page) override {
    ListQuery query(
        "SELECT d.created_unix_ms, d.dataset_id, v.version, v.rows_blob, "
        "v.payload FROM datasets d JOIN dataset_versions v ON v.dataset_id = "
        "d.dataset_id AND v.version = d.latest_version",
        "d.created_unix_ms", "d.dataset_id");
    BNN_RETURN_IF_ERROR(query.Finish("datasets", page));
    return List<DatasetVersionRecord>(
        query, "datasets", page,
        [&](const SqlStatement& s) -> absl::StatusOr<DatasetVersionRecord> {
          return DatasetRow(s.Text(1), s, /*first_column=*/2);
        });
  }

  absl::StatusOr<int64_t> CountDatasets() override {
    return c_->QueryInt("SELECT COUNT(*) FROM datasets");
  }

  absl::StatusOr<std::vector<DatasetVersionRecord>> ListDatasetVersions(
      absl::string_view dataset_id) override {
    BNN_RETURN_IF_ERROR(DatasetExists(dataset_id));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("SELECT version, rows_blob, payload FROM "
                    "dataset_versions WHERE dataset_id = ? ORDER BY version"));
    s->Bind(1, dataset_id);
    std::vector<DatasetVersionRecord> versions;
    while (true) {
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) break;
      BNN_ASSIGN_OR_RETURN(versions.emplace_back(), DatasetRow(dataset_id, *s));
    }
    return versions;
  }

  absl::Status CreateDataset(const DatasetVersionRecord& record) override {
    const store::DatasetMeta& meta = record.meta;
    BNN_RETURN_IF_ERROR(CheckDatasetRecord(record));
    if (meta.version() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset ", meta.dataset_id(),
          ": a new dataset starts at version 1, got version ", meta.version()));
    }
    {
      BNN_ASSIGN_OR_RETURN(
          Statement s,
          c_->Prepare("SELECT 1 FROM datasets WHERE dataset_id = ?"));
      s->Bind(1, meta.dataset_id());
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (row) {
        return absl::AlreadyExistsError(
            absl::StrCat("dataset ", meta.dataset_id(), " already exists"));
      }
    }
    if (!meta.name().empty()) {
      BNN_ASSIGN_OR_RETURN(
          Statement s,
          c_->Prepare("SELECT dataset_id FROM datasets WHERE name = ?"));
      s->Bind(1, meta.name());
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (row) {
        return absl::AlreadyExistsError(
            absl::StrCat("dataset name ", Quoted(meta.name()),
                         " is taken by dataset ", s->Text(0)));
      }
    }
    {
      BNN_ASSIGN_OR_RETURN(
          Statement s,
          c_->Prepare("INSERT INTO datasets (dataset_id, name, "
                      "created_unix_ms, latest_version) VALUES (?, ?, ?, 1)"));
      s->Bind(1, meta.dataset_id())
          .BindTextOrNull(2, meta.name())
          .Bind(3, meta.created_unix_ms());
      BNN_RETURN_IF_ERROR(s->Run());
    }
    return InsertDatasetVersion(record);
  }

  absl::Status AddDatasetVersion(const DatasetVersionRecord& record) override {
    const store::DatasetMeta& meta = record.meta;
    BNN_RETURN_IF_ERROR(CheckDatasetRecord(record));
    int64_t latest = 0;
    {
      BNN_ASSIGN_OR_RETURN(
          Statement s, c_->Prepare("SELECT latest_version FROM datasets WHERE "
                                   "dataset_id = ?"));
      s->Bind(1, meta.dataset_id());
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) {
        return absl::NotFoundError(
            absl::StrCat("dataset ", meta.dataset_id(), " not found"));
      }
      latest = s->Int(0);
    }
    if (meta.version() != latest + 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("dataset ", meta.dataset_id(), ": version ",
                       meta.version(), " cannot follow version ", latest,
                       " (the latest); expected version ", latest + 1));
    }
    BNN_RETURN_IF_ERROR(InsertDatasetVersion(record));
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("UPDATE datasets SET latest_version = ? "
                                     "WHERE dataset_id = ?"));
    s->Bind(1, meta.version()).Bind(2, meta.dataset_id());
    return s->Run();
  }

  absl::Status DeleteDataset(absl::string_view dataset_id) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s, c_->Prepare("DELETE FROM datasets WHERE dataset_id = ?"));
    s->Bind(1, dataset_id);
    BNN_RETURN_IF_ERROR(s->Run());
    if (s->Changes() == 0) {
      return absl::NotFoundError(
          absl::StrCat("dataset ", dataset_id, " not found"));
    }
    return absl::OkStatus();
  }

  // ---- Snapshots.

  absl::StatusOr<SnapshotRecord> GetSnapshot(
      absl::string_view snapshot_id) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s, c_->Prepare("SELECT payload_blob, payload FROM snapshots "
                                 "WHERE snapshot_id = ?"));
    s->Bind(1, snapshot_id);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      return absl::NotFoundError(
          absl::StrCat("snapshot ", snapshot_id, " not found"));
    }
    return SnapshotRow(snapshot_id, *s, 0);
  }

  absl::StatusOr<Page<SnapshotRecord>> ListSnapshots(
      const SnapshotFilter& filter, const PageRequest& page) override {
    ListQuery query(
        "SELECT created_unix_ms, snapshot_id, payload_blob, payload FROM "
        "snapshots",
        "created_unix_ms", "snapshot_id");
    if (!filter.dataset_id.empty()) {
      query.Where("dataset_id = ?", {filter.dataset_id});
    }
    if (!filter.method.empty()) query.Where("method = ?", {filter.method});
    BNN_RETURN_IF_ERROR(query.Finish("snapshots", page));
    return List<SnapshotRecord>(
        query, "snapshots", page,
        [&](const SqlStatement& s) -> absl::StatusOr<SnapshotRecord> {
          return SnapshotRow(s.Text(1), s, 2);
        });
  }

  absl::StatusOr<int64_t> CountSnapshots() override {
    return c_->QueryInt("SELECT COUNT(*) FROM snapshots");
  }

  absl::Status CreateSnapshot(const SnapshotRecord& record) override {
    const store::SnapshotMeta& meta = record.meta;
    if (meta.snapshot_id().empty() || record.payload_blob.empty()) {
      return absl::InvalidArgumentError(
          "a snapshot record needs its snapshot_id and payload_blob");
    }
    {
      BNN_ASSIGN_OR_RETURN(
          Statement s,
          c_->Prepare("SELECT 1 FROM snapshots WHERE snapshot_id = ?"));
      s->Bind(1, meta.snapshot_id());
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (row) {
        return absl::AlreadyExistsError(
            absl::StrCat("snapshot ", meta.snapshot_id(), " already exists"));
      }
    }
    BNN_ASSIGN_OR_RETURN(const std::string payload,
                         EncodePayload(RecordKind::kSnapshot, meta));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("INSERT INTO snapshots (snapshot_id, dataset_id, method, "
                    "created_unix_ms, payload_blob, payload) VALUES (?, ?, "
                    "?, ?, ?, ?)"));
    s->Bind(1, meta.snapshot_id())
        .Bind(2, meta.dataset_id())
        .Bind(3, meta.method())
        .Bind(4, meta.created_unix_ms())
        .Bind(5, record.payload_blob)
        .BindBlob(6, payload);
    return s->Run();
  }

  absl::Status DeleteSnapshot(absl::string_view snapshot_id) override {
    BNN_ASSIGN_OR_RETURN(const std::vector<store::ModelVersion> versions,
                         ListVersionsOfSnapshot(snapshot_id));
    if (!versions.empty()) {
      std::vector<std::string> names;
      for (const store::ModelVersion& v : versions) {
        names.push_back(absl::StrCat(v.model_name(), ":", v.version()));
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "snapshot ", snapshot_id, " is published as model ",
          absl::StrJoin(names, ", "), "; delete those versions first"));
    }
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("DELETE FROM snapshots WHERE snapshot_id = ?"));
    s->Bind(1, snapshot_id);
    BNN_RETURN_IF_ERROR(s->Run());
    if (s->Changes() == 0) {
      return absl::NotFoundError(
          absl::StrCat("snapshot ", snapshot_id, " not found"));
    }
    return absl::OkStatus();
  }

  // ---- Jobs.

  absl::StatusOr<store::JobRecord> GetJob(absl::string_view job_id) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s, c_->Prepare("SELECT payload FROM jobs WHERE job_id = ?"));
    s->Bind(1, job_id);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
    }
    return JobRow(job_id, *s, 0);
  }

  absl::StatusOr<Page<store::JobRecord>> ListJobs(
      const JobFilter& filter, const PageRequest& page) override {
    ListQuery query("SELECT created_unix_ms, job_id, payload FROM jobs",
                    "created_unix_ms", "job_id");
    if (!filter.states.empty()) {
      std::vector<SqlValue> states;
      for (const store::JobRecord::State state : filter.states) {
        states.push_back(int64_t{state});
      }
      std::vector<absl::string_view> marks(states.size(), "?");
      query.Where(absl::StrCat("state IN (", absl::StrJoin(marks, ", "), ")"),
                  std::move(states));
    }
    if (!filter.dataset_id.empty()) {
      query.Where("dataset_id = ?", {filter.dataset_id});
    }
    if (!filter.method.empty()) query.Where("method = ?", {filter.method});
    if (!filter.model_name.empty()) {
      query.Where("model_name = ?", {filter.model_name});
    }
    BNN_RETURN_IF_ERROR(query.Finish("jobs", page));
    return List<store::JobRecord>(
        query, "jobs", page,
        [&](const SqlStatement& s) -> absl::StatusOr<store::JobRecord> {
          return JobRow(s.Text(1), s, 2);
        });
  }

  absl::StatusOr<std::vector<std::pair<store::JobRecord::State, int64_t>>>
  CountJobsByState() override {
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    std::vector<std::pair<store::JobRecord::State, int64_t>> counts;
    while (true) {
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) break;
      counts.emplace_back(static_cast<store::JobRecord::State>(s->Int(0)),
                          s->Int(1));
    }
    return counts;
  }

  absl::Status CreateJob(const store::JobRecord& job) override {
    if (job.job_id().empty()) {
      return absl::InvalidArgumentError("a job record needs its job_id");
    }
    {
      BNN_ASSIGN_OR_RETURN(Statement s,
                           c_->Prepare("SELECT 1 FROM jobs WHERE job_id = ?"));
      s->Bind(1, job.job_id());
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (row) {
        return absl::AlreadyExistsError(
            absl::StrCat("job ", job.job_id(), " already exists"));
      }
    }
    BNN_ASSIGN_OR_RETURN(const std::string payload,
                         EncodePayload(RecordKind::kJob, job));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("INSERT INTO jobs (job_id, state, dataset_id, method, "
                    "model_name, created_unix_ms, heartbeat_unix_ms, "
                    "payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"));
    s->Bind(1, job.job_id())
        .Bind(2, int64_t{job.state()})
        .Bind(3, job.dataset_id())
        .Bind(4, job.method())
        .BindTextOrNull(5, job.model_name())
        .Bind(6, job.created_unix_ms())
        .Bind(7, job.heartbeat_unix_ms())
        .BindBlob(8, payload);
    return s->Run();
  }

  absl::Status UpdateJob(const store::JobRecord& job) override {
    BNN_ASSIGN_OR_RETURN(const std::string payload,
                         EncodePayload(RecordKind::kJob, job));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("UPDATE jobs SET state = ?, dataset_id = ?, method = ?, "
                    "model_name = ?, created_unix_ms = ?, heartbeat_unix_ms = "
                    "?, payload = ? WHERE job_id = ?"));
    s->Bind(1, int64_t{job.state()})
        .Bind(2, job.dataset_id())
        .Bind(3, job.method())
        .BindTextOrNull(4, job.model_name())
        .Bind(5, job.created_unix_ms())
        .Bind(6, job.heartbeat_unix_ms())
        .BindBlob(7, payload)
        .Bind(8, job.job_id());
    BNN_RETURN_IF_ERROR(s->Run());
    if (s->Changes() == 0) {
      return absl::NotFoundError(
          absl::StrCat("job ", job.job_id(), " not found"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::optional<store::JobRecord>> NextClaimableJob(
      int64_t stale_before_unix_ms) override {
    // Two indexed lookups (jobs_by_state), each the oldest of its kind:
    // jobs to resume come before queued ones. PostgreSQL locks the row it
    // returns and skips rows other transactions hold (FOR UPDATE SKIP
    // LOCKED), SQLite's one writer needs no row lock.
    const std::string lock(c_->RowLockClause());
    const std::string resume = absl::StrCat(
        "SELECT job_id, payload FROM jobs WHERE state = ",
        int{store::JobRecord::INTERRUPTED}, " OR (state IN (",
        int{store::JobRecord::RUNNING}, ", ", int{store::JobRecord::CANCELLING},
        ") AND heartbeat_unix_ms < ?) ORDER BY created_unix_ms, job_id LIMIT "
        "1",
        lock);
    const std::string queued =
        absl::StrCat("SELECT job_id, payload FROM jobs WHERE state = ",
                     int{store::JobRecord::QUEUED},
                     " ORDER BY created_unix_ms, job_id LIMIT 1", lock);
    {
      BNN_ASSIGN_OR_RETURN(Statement s, c_->Prepare(resume));
      s->Bind(1, stale_before_unix_ms);
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (row) {
        BNN_ASSIGN_OR_RETURN(store::JobRecord job, JobRow(s->Text(0), *s, 1));
        return std::optional<store::JobRecord>(std::move(job));
      }
    }
    BNN_ASSIGN_OR_RETURN(Statement s, c_->Prepare(queued));
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) return std::optional<store::JobRecord>();
    BNN_ASSIGN_OR_RETURN(store::JobRecord job, JobRow(s->Text(0), *s, 1));
    return std::optional<store::JobRecord>(std::move(job));
  }

  absl::Status DeleteJob(absl::string_view job_id) override {
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("DELETE FROM jobs WHERE job_id = ?"));
    s->Bind(1, job_id);
    BNN_RETURN_IF_ERROR(s->Run());
    if (s->Changes() == 0) {
      return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
    }
    return absl::OkStatus();
  }

  // ---- Models.

  absl::StatusOr<store::ModelInfo> GetModel(absl::string_view name) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s, c_->Prepare("SELECT payload FROM models WHERE name = ?"));
    s->Bind(1, name);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      return absl::NotFoundError(
          absl::StrCat("model ", Quoted(name), " not found"));
    }
    return ModelRow(name, *s, 0);
  }

  absl::StatusOr<std::vector<store::ModelInfo>> ListModels(
      absl::string_view after, int limit) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s, c_->Prepare("SELECT name, payload FROM models WHERE name "
                                 "> ? ORDER BY name LIMIT ?"));
    s->Bind(1, after).Bind(2, int64_t{limit});
    std::vector<store::ModelInfo> models;
    while (true) {
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) break;
      BNN_ASSIGN_OR_RETURN(models.emplace_back(), ModelRow(s->Text(0), *s, 1));
    }
    return models;
  }

  absl::StatusOr<int64_t> CountModels() override {
    return c_->QueryInt("SELECT COUNT(*) FROM models");
  }

  absl::StatusOr<store::ModelVersion> GetModelVersion(
      absl::string_view model_name, int64_t version) override {
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("SELECT payload FROM model_versions WHERE "
                                     "model_name = ? AND version = ?"));
    s->Bind(1, model_name).Bind(2, version);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      s.reset();
      BNN_RETURN_IF_ERROR(ModelExists(model_name));
      return absl::NotFoundError(absl::StrCat("model ", Quoted(model_name),
                                              " has no version ", version));
    }
    return ModelVersionRow(model_name, version, *s, 0);
  }

  absl::StatusOr<Page<store::ModelVersion>> ListModelVersions(
      absl::string_view model_name, const PageRequest& page) override {
    BNN_RETURN_IF_ERROR(ModelExists(model_name));
    // The model's name is the id column: one value for every row, so the
    // version alone orders the page.
    ListQuery query("SELECT version, model_name, payload FROM model_versions",
                    "version", "model_name");
    query.Where("model_name = ?", {std::string(model_name)});
    const std::string list = absl::StrCat("versions of model ", model_name);
    BNN_RETURN_IF_ERROR(query.Finish(list, page));
    return List<store::ModelVersion>(
        query, list, page,
        [&](const SqlStatement& s) -> absl::StatusOr<store::ModelVersion> {
          return ModelVersionRow(model_name, s.Int(0), s, 2);
        });
  }

  absl::StatusOr<std::vector<store::ModelVersion>> ListVersionsOfSnapshot(
      absl::string_view snapshot_id) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("SELECT model_name, version, payload FROM model_versions "
                    "WHERE snapshot_id = ? ORDER BY model_name, version"));
    s->Bind(1, snapshot_id);
    std::vector<store::ModelVersion> versions;
    while (true) {
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) break;
      BNN_ASSIGN_OR_RETURN(versions.emplace_back(),
                           ModelVersionRow(s->Text(0), s->Int(1), *s, 2));
    }
    return versions;
  }

  absl::StatusOr<store::ModelAlias> GetAlias(absl::string_view model_name,
                                             absl::string_view alias) override {
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("SELECT payload FROM model_aliases WHERE "
                                     "model_name = ? AND alias = ?"));
    s->Bind(1, model_name).Bind(2, alias);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      s.reset();
      BNN_RETURN_IF_ERROR(ModelExists(model_name));
      return absl::NotFoundError(absl::StrCat("model ", Quoted(model_name),
                                              " has no alias ", Quoted(alias)));
    }
    return AliasRow(model_name, alias, *s, 0);
  }

  absl::StatusOr<std::vector<store::ModelAlias>> ListAliases(
      absl::string_view model_name) override {
    BNN_RETURN_IF_ERROR(ModelExists(model_name));
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("SELECT alias, payload FROM model_aliases "
                                     "WHERE model_name = ? ORDER BY alias"));
    s->Bind(1, model_name);
    std::vector<store::ModelAlias> aliases;
    while (true) {
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) break;
      BNN_ASSIGN_OR_RETURN(aliases.emplace_back(),
                           AliasRow(model_name, s->Text(0), *s, 1));
    }
    return aliases;
  }

  absl::StatusOr<store::ModelVersion> PublishModelVersion(
      absl::string_view model_name, absl::string_view snapshot_id,
      int64_t created_unix_ms) override {
    if (model_name.empty()) {
      return absl::InvalidArgumentError("model_name: must not be empty");
    }
    {
      BNN_ASSIGN_OR_RETURN(
          Statement s,
          c_->Prepare("SELECT 1 FROM snapshots WHERE snapshot_id = ?"));
      s->Bind(1, snapshot_id);
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) {
        return absl::NotFoundError(
            absl::StrCat("snapshot ", snapshot_id, " not found"));
      }
    }
    store::ModelInfo model;
    absl::StatusOr<store::ModelInfo> existing = GetModel(model_name);
    if (existing.ok()) {
      model = *std::move(existing);
    } else if (absl::IsNotFound(existing.status())) {
      model.set_name(std::string(model_name));
      model.set_next_version(1);
      model.set_created_unix_ms(created_unix_ms);
    } else {
      return existing.status();
    }
    store::ModelVersion version;
    version.set_model_name(std::string(model_name));
    version.set_version(model.next_version());
    version.set_snapshot_id(std::string(snapshot_id));
    version.set_created_unix_ms(created_unix_ms);
    model.set_next_version(model.next_version() + 1);
    model.set_updated_unix_ms(created_unix_ms);
    BNN_RETURN_IF_ERROR(PutModel(model));
    BNN_ASSIGN_OR_RETURN(const std::string payload,
                         EncodePayload(RecordKind::kModelVersion, version));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("INSERT INTO model_versions (model_name, version, "
                    "snapshot_id, payload) VALUES (?, ?, ?, ?)"));
    s->Bind(1, model_name)
        .Bind(2, version.version())
        .Bind(3, snapshot_id)
        .BindBlob(4, payload);
    BNN_RETURN_IF_ERROR(s->Run());
    return version;
  }

  absl::Status DeleteModelVersion(absl::string_view model_name,
                                  int64_t version) override {
    BNN_RETURN_IF_ERROR(GetModelVersion(model_name, version).status());
    {
      BNN_ASSIGN_OR_RETURN(
          Statement s,
          c_->Prepare("SELECT alias FROM model_aliases WHERE model_name = ? "
                      "AND version = ? ORDER BY alias"));
      s->Bind(1, model_name).Bind(2, version);
      std::vector<std::string> aliases;
      while (true) {
        BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
        if (!row) break;
        aliases.push_back(s->Text(0));
      }
      if (!aliases.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model ", Quoted(model_name), " version ", version,
            " is the target of alias ", absl::StrJoin(aliases, ", "),
            "; move or delete the aliases first"));
      }
    }
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("DELETE FROM model_versions WHERE "
                                     "model_name = ? AND version = ?"));
    s->Bind(1, model_name).Bind(2, version);
    return s->Run();
  }

  absl::StatusOr<store::ModelAlias> SetAlias(absl::string_view model_name,
                                             absl::string_view alias,
                                             int64_t version,
                                             int64_t updated_unix_ms) override {
    if (alias.empty()) {
      return absl::InvalidArgumentError("alias: must not be empty");
    }
    BNN_RETURN_IF_ERROR(GetModelVersion(model_name, version).status());
    store::ModelAlias record;
    record.set_model_name(std::string(model_name));
    record.set_alias(std::string(alias));
    record.set_version(version);
    record.set_updated_unix_ms(updated_unix_ms);
    BNN_ASSIGN_OR_RETURN(const std::string payload,
                         EncodePayload(RecordKind::kModelAlias, record));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("INSERT INTO model_aliases (model_name, alias, version, "
                    "payload) VALUES (?, ?, ?, ?) ON CONFLICT (model_name, "
                    "alias) DO UPDATE SET version = excluded.version, "
                    "payload = excluded.payload"));
    s->Bind(1, model_name).Bind(2, alias).Bind(3, version).BindBlob(4, payload);
    BNN_RETURN_IF_ERROR(s->Run());
    return record;
  }

  absl::Status DeleteAlias(absl::string_view model_name,
                           absl::string_view alias) override {
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("DELETE FROM model_aliases WHERE "
                                     "model_name = ? AND alias = ?"));
    s->Bind(1, model_name).Bind(2, alias);
    BNN_RETURN_IF_ERROR(s->Run());
    if (s->Changes() == 0) {
      s.reset();
      BNN_RETURN_IF_ERROR(ModelExists(model_name));
      return absl::NotFoundError(absl::StrCat("model ", Quoted(model_name),
                                              " has no alias ", Quoted(alias)));
    }
    return absl::OkStatus();
  }

  absl::Status DeleteModel(absl::string_view name) override {
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("DELETE FROM models WHERE name = ?"));
    s->Bind(1, name);
    BNN_RETURN_IF_ERROR(s->Run());
    if (s->Changes() == 0) {
      return absl::NotFoundError(
          absl::StrCat("model ", Quoted(name), " not found"));
    }
    return absl::OkStatus();
  }

  absl::Status RestoreModel(
      const store::ModelInfo& model,
      absl::Span<const store::ModelVersion> versions,
      absl::Span<const store::ModelAlias> aliases) override {
    if (model.name().empty()) {
      return absl::InvalidArgumentError("model name: must not be empty");
    }
    if (absl::Status exists = ModelExists(model.name()); exists.ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("model ", Quoted(model.name()), " already exists"));
    } else if (!absl::IsNotFound(exists)) {
      return exists;
    }
    BNN_RETURN_IF_ERROR(PutModel(model));
    for (const store::ModelVersion& version : versions) {
      if (version.model_name() != model.name() || version.version() < 1 ||
          version.version() >= model.next_version()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model ", Quoted(model.name()), ": version ", version.version(),
            " of model ", Quoted(version.model_name()),
            " does not fit below its next version ", model.next_version()));
      }
      {
        BNN_ASSIGN_OR_RETURN(
            Statement s,
            c_->Prepare("SELECT 1 FROM snapshots WHERE snapshot_id = ?"));
        s->Bind(1, version.snapshot_id());
        BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
        if (!row) {
          return absl::NotFoundError(
              absl::StrCat("snapshot ", version.snapshot_id(), " not found"));
        }
      }
      BNN_ASSIGN_OR_RETURN(const std::string payload,
                           EncodePayload(RecordKind::kModelVersion, version));
      BNN_ASSIGN_OR_RETURN(
          Statement s,
          c_->Prepare("INSERT INTO model_versions (model_name, version, "
                      "snapshot_id, payload) VALUES (?, ?, ?, ?)"));
      s->Bind(1, model.name())
          .Bind(2, version.version())
          .Bind(3, version.snapshot_id())
          .BindBlob(4, payload);
      BNN_RETURN_IF_ERROR(s->Run());
    }
    for (const store::ModelAlias& alias : aliases) {
      absl::Status set = SetAlias(model.name(), alias.alias(), alias.version(),
                                  alias.updated_unix_ms())
                             .status();
      if (absl::IsNotFound(set)) {
        return absl::FailedPreconditionError(set.message());
      }
      BNN_RETURN_IF_ERROR(set);
    }
    return absl::OkStatus();
  }

  // ---- The store.

  absl::StatusOr<absl::flat_hash_set<std::string>> ReferencedBlobs() override {
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("SELECT rows_blob FROM dataset_versions UNION SELECT "
                    "payload_blob FROM snapshots"));
    absl::flat_hash_set<std::string> blobs;
    while (true) {
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) break;
      blobs.insert(s->Text(0));
    }
    return blobs;
  }

  absl::StatusOr<bool> IsBlobReferenced(absl::string_view blob) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("SELECT CASE WHEN EXISTS (SELECT 1 FROM dataset_versions "
                    "WHERE rows_blob = ?) OR EXISTS (SELECT 1 FROM snapshots "
                    "WHERE payload_blob = ?) THEN 1 ELSE 0 END"));
    s->Bind(1, blob).Bind(2, blob);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    return row && s->Int(0) != 0;
  }

  absl::StatusOr<std::optional<std::string>> GetProperty(
      absl::string_view key) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s, c_->Prepare("SELECT value FROM store_info WHERE key = ?"));
    s->Bind(1, key);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) return std::nullopt;
    return s->Text(0);
  }

  absl::Status SetProperty(absl::string_view key,
                           absl::string_view value) override {
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("INSERT INTO store_info (key, value) VALUES (?, ?) ON "
                    "CONFLICT (key) DO UPDATE SET value = excluded.value"));
    s->Bind(1, key).Bind(2, value);
    return s->Run();
  }

 private:
  template <typename T, typename Decode>
  absl::StatusOr<Page<T>> List(const ListQuery& query, absl::string_view list,
                               const PageRequest& page, Decode decode) {
    BNN_ASSIGN_OR_RETURN(Statement s, c_->Prepare(query.sql()));
    for (size_t i = 0; i < query.values().size(); ++i) {
      s->Bind(static_cast<int>(i) + 1, query.values()[i]);
    }
    Page<T> result;
    int64_t last_key = 0;
    std::string last_id;
    while (true) {
      BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
      if (!row) break;
      if (static_cast<int64_t>(result.items.size()) == page.page_size) {
        result.next_page_token = EncodePageToken(list, last_key, last_id);
        break;
      }
      last_key = s->Int(0);
      last_id = s->Text(1);
      BNN_ASSIGN_OR_RETURN(T item, decode(*s));
      result.items.push_back(std::move(item));
    }
    return result;
  }

  absl::Status CheckDatasetRecord(const DatasetVersionRecord& record) {
    if (record.meta.dataset_id().empty() || record.rows_blob.empty()) {
      return absl::InvalidArgumentError(
          "a dataset version record needs its dataset_id and rows_blob");
    }
    return absl::OkStatus();
  }

  absl::Status InsertDatasetVersion(const DatasetVersionRecord& record) {
    BNN_ASSIGN_OR_RETURN(
        const std::string payload,
        EncodePayload(RecordKind::kDatasetVersion, record.meta));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("INSERT INTO dataset_versions (dataset_id, version, "
                    "rows_blob, payload) VALUES (?, ?, ?, ?)"));
    s->Bind(1, record.meta.dataset_id())
        .Bind(2, record.meta.version())
        .Bind(3, record.rows_blob)
        .BindBlob(4, payload);
    return s->Run();
  }

  absl::Status PutModel(const store::ModelInfo& model) {
    BNN_ASSIGN_OR_RETURN(const std::string payload,
                         EncodePayload(RecordKind::kModel, model));
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("INSERT INTO models (name, created_unix_ms, payload) "
                    "VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "payload = excluded.payload"));
    s->Bind(1, model.name())
        .Bind(2, model.created_unix_ms())
        .BindBlob(3, payload);
    return s->Run();
  }

  absl::Status DatasetExists(absl::string_view dataset_id) {
    BNN_ASSIGN_OR_RETURN(
        Statement s,
        c_->Prepare("SELECT 1 FROM datasets WHERE dataset_id = ?"));
    s->Bind(1, dataset_id);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      return absl::NotFoundError(
          absl::StrCat("dataset ", dataset_id, " not found"));
    }
    return absl::OkStatus();
  }

  absl::Status ModelExists(absl::string_view name) {
    BNN_ASSIGN_OR_RETURN(Statement s,
                         c_->Prepare("SELECT 1 FROM models WHERE name = ?"));
    s->Bind(1, name);
    BNN_ASSIGN_OR_RETURN(const bool row, s->Step());
    if (!row) {
      return absl::NotFoundError(
          absl::StrCat("model ", Quoted(name), " not found"));
    }
    return absl::OkStatus();
  }

  // Row decoders: the payload at `column` (and the blob before it), checked
  // against the row's key so that a payload copied to another row is
  // DataLoss too.
  static absl::StatusOr<DatasetVersionRecord> DatasetRow(
      absl::string_view dataset_id, const SqlStatement& s,
      int first_column = 0) {
    const int64_t version = s.Int(first_column);
    const std::string what =
        absl::StrCat("dataset ", dataset_id, " version ", version);
    DatasetVersionRecord record;
    record.rows_blob = s.Text(first_column + 1);
    BNN_RETURN_IF_ERROR(DecodePayload(RecordKind::kDatasetVersion,
                                      s.Blob(first_column + 2), what,
                                      &record.meta));
    if (record.meta.dataset_id() != dataset_id ||
        record.meta.version() != version) {
      return Mismatch(what, absl::StrCat("dataset ", record.meta.dataset_id(),
                                         " version ", record.meta.version()));
    }
    return record;
  }

  static absl::StatusOr<SnapshotRecord> SnapshotRow(
      absl::string_view snapshot_id, const SqlStatement& s, int column) {
    const std::string what = absl::StrCat("snapshot ", snapshot_id);
    SnapshotRecord record;
    record.payload_blob = s.Text(column);
    BNN_RETURN_IF_ERROR(DecodePayload(RecordKind::kSnapshot, s.Blob(column + 1),
                                      what, &record.meta));
    if (record.meta.snapshot_id() != snapshot_id) {
      return Mismatch(what, record.meta.snapshot_id());
    }
    return record;
  }

  static absl::StatusOr<store::JobRecord> JobRow(absl::string_view job_id,
                                                 const SqlStatement& s,
                                                 int column) {
    const std::string what = absl::StrCat("job ", job_id);
    store::JobRecord job;
    BNN_RETURN_IF_ERROR(
        DecodePayload(RecordKind::kJob, s.Blob(column), what, &job));
    if (job.job_id() != job_id) return Mismatch(what, job.job_id());
    return job;
  }

  static absl::StatusOr<store::ModelInfo> ModelRow(absl::string_view name,
                                                   const SqlStatement& s,
                                                   int column) {
    const std::string what = absl::StrCat("model ", Quoted(name));
    store::ModelInfo model;
    BNN_RETURN_IF_ERROR(
        DecodePayload(RecordKind::kModel, s.Blob(column), what, &model));
    if (model.name() != name) return Mismatch(what, model.name());
    return model;
  }

  static absl::StatusOr<store::ModelVersion> ModelVersionRow(
      absl::string_view model_name, int64_t version, const SqlStatement& s,
      int column) {
    const std::string what =
        absl::StrCat("model ", Quoted(model_name), " version ", version);
    store::ModelVersion record;
    BNN_RETURN_IF_ERROR(DecodePayload(RecordKind::kModelVersion, s.Blob(column),
                                      what, &record));
    if (record.model_name() != model_name || record.version() != version) {
      return Mismatch(what, absl::StrCat(record.model_name(), " version ",
                                         record.version()));
    }
    return record;
  }

  static absl::StatusOr<store::ModelAlias> AliasRow(
      absl::string_view model_name, absl::string_view alias,
      const SqlStatement& s, int column) {
    const std::string what =
        absl::StrCat("model ", Quoted(model_name), " alias ", Quoted(alias));
    store::ModelAlias record;
    BNN_RETURN_IF_ERROR(
        DecodePayload(RecordKind::kModelAlias, s.Blob(column), what, &record));
    if (record.model_name() != model_name || record.alias() != alias) {
      return Mismatch(
          what, absl::StrCat(record.model_name(), " alias ", record.alias()));
    }
    return record;
  }

  static absl::Status Mismatch(absl::string_view what,
                               absl::string_view found) {
    return absl::DataLossError(absl::StrCat(
        what, ": stored record is inconsistent: it holds ", found));
  }

  SqlConnection* const c_;
};

}  // namespace

std::unique_ptr<MetadataTransaction> NewSqlMetadataOps(
    SqlConnection* connection) {
  return std::make_unique<SqlMetadataOps>(connection);
}

}  // namespace bnn::server
