#include "bench/faults/store_model.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sqlite3.h>
#include <system_error>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/time/clock.h>

namespace bnn::faults {
namespace {

// The error of a job that was running when the server stopped (docs/api.md,
// GetJob).
constexpr absl::string_view kRestartedJobError =
    "server restarted while the job was running";
// Tracked snapshots exported again after each restart, besides new ones.
constexpr int kReexportsPerVerify = 2;
constexpr absl::Duration kJobPoll = absl::Milliseconds(100);

int Index(OpKind kind) { return static_cast<int>(kind); }

std::string Describe(const v1::Job& job) {
  std::string out =
      absl::StrCat(job.job_id(), " ", v1::JobState_Name(job.state()));
  if (!job.error().empty()) absl::StrAppend(&out, " (", job.error(), ")");
  if (!job.snapshot_id().empty()) {
    absl::StrAppend(&out, " snapshot ", job.snapshot_id());
  }
  absl::StrAppend(&out, " started_ms ", job.started_unix_ms(), " finished_ms ",
                  job.finished_unix_ms());
  return out;
}

std::string DescribeFingerprint(const std::vector<double>& values) {
  return absl::StrCat("[", absl::StrJoin(values, ", "), "]");
}

uint64_t JobSeed(const v1::Job& job) {
  uint64_t seed = 0;
  const auto it = job.params().find("seed");
  if (it == job.params().end() || !absl::SimpleAtoi(it->second, &seed)) {
    return 0;
  }
  return seed;
}

}  // namespace

void StoreModel::AddViolation(int cycle, std::string kind, std::string detail) {
  violations_.push_back(Violation{cycle, std::move(kind), std::move(detail)});
}

void StoreModel::AckUpload(int cycle, const std::string& name,
                           const Schema& schema, const DatasetHasher& hasher,
                           const v1::DatasetInfo& info) {
  TrackedDataset dataset{
      info.dataset_id(),
      name,
      schema,
      {VersionExpect{hasher.num_rows(), hasher.HexDigest(schema.class_values)}},
      hasher};
  const VersionExpect& expect = dataset.versions[0];
  if (info.version() != 1 || info.num_rows() != expect.num_rows ||
      info.hash() != expect.hash) {
    AddViolation(
        cycle, "changed",
        absl::StrCat("upload '", name, "' was acknowledged as ",
                     info.dataset_id(), " version ", info.version(), " with ",
                     info.num_rows(), " rows, hash ", info.hash(), "; sent ",
                     expect.num_rows, " rows, hash ", expect.hash));
  }
  datasets_.emplace(info.dataset_id(), std::move(dataset));
}

void StoreModel::AckAppend(int cycle, const std::string& dataset_id,
                           const DatasetHasher& hasher, int64_t num_rows,
                           const v1::DatasetInfo& info) {
  TrackedDataset& dataset = datasets_.at(dataset_id);
  const VersionExpect expect{num_rows,
                             hasher.HexDigest(dataset.schema.class_values)};
  const int64_t version = static_cast<int64_t>(dataset.versions.size()) + 1;
  if (info.version() != version || info.num_rows() != expect.num_rows ||
      info.hash() != expect.hash) {
    AddViolation(
        cycle, "changed",
        absl::StrCat("append to ", dataset_id, " was acknowledged as version ",
                     info.version(), " with ", info.num_rows(), " rows, hash ",
                     info.hash(), "; expected version ", version, " with ",
                     expect.num_rows, " rows, hash ", expect.hash));
  }
  dataset.versions.push_back(expect);
  dataset.hasher = hasher;
}

void StoreModel::AckImport(int cycle, const ImportSource& source,
                           const v1::SnapshotInfo& info) {
  if (info.size_bytes() != static_cast<int64_t>(source.bytes.size())) {
    AddViolation(
        cycle, "changed",
        absl::StrCat("import of ", source.name, " was acknowledged as ",
                     info.snapshot_id(), " of ", info.size_bytes(),
                     " bytes; sent ", source.bytes.size()));
  }
  TrackedSnapshot& snapshot = snapshots_[info.snapshot_id()];
  snapshot.origin = absl::StrCat("import of ", source.name);
  snapshot.num_features = source.num_features;
  snapshot.size_bytes = static_cast<int64_t>(source.bytes.size());
  snapshot.sha256 = source.sha256;
  snapshot.fingerprint = source.fingerprint;
  new_imports_[info.snapshot_id()] = &source;
}

void StoreModel::AckJob(const std::string& job_id, uint64_t seed,
                        const std::string& dataset_id) {
  TrackedJob& job = jobs_[job_id];
  job.seed = seed;
  job.dataset_id = dataset_id;
}

void StoreModel::SawJob(const v1::Job& job) {
  const auto it = jobs_.find(job.job_id());
  if (it != jobs_.end()) it->second.last_seen = job;
}

void StoreModel::AddPendingUpload(PendingUpload pending) {
  pending_uploads_.push_back(std::move(pending));
}
void StoreModel::AddPendingAppend(PendingAppend pending) {
  pending_appends_.push_back(std::move(pending));
}
void StoreModel::AddPendingImport(const ImportSource* source) {
  pending_imports_.push_back(source);
}
void StoreModel::AddPendingJob(PendingJob pending) {
  pending_jobs_.push_back(std::move(pending));
}

std::vector<StoreModel::DatasetSummary> StoreModel::Datasets() const {
  std::vector<DatasetSummary> out;
  for (const auto& [id, dataset] : datasets_) {
    out.push_back(DatasetSummary{id, dataset.versions.back().num_rows,
                                 dataset.schema.num_features,
                                 static_cast<int64_t>(dataset.versions.size()),
                                 &dataset.schema, &dataset.hasher});
  }
  return out;
}

std::vector<std::string> StoreModel::SnapshotIds() const {
  std::vector<std::string> ids;
  for (const auto& [id, snapshot] : snapshots_) ids.push_back(id);
  return ids;
}

std::vector<v1::Job> StoreModel::SeenJobs() const {
  std::vector<v1::Job> jobs;
  for (const auto& [id, job] : jobs_) jobs.push_back(job.last_seen);
  return jobs;
}

int64_t StoreModel::num_dataset_versions() const {
  int64_t n = 0;
  for (const auto& [id, dataset] : datasets_) n += dataset.versions.size();
  return n;
}

void StoreModel::Verify(client::BnnClient& client, int cycle,
                        std::optional<Restart> restart,
                        absl::Duration job_timeout, Outcomes* outcomes) {
  // Jobs first: they finish before the directory is listed, so that no
  // file is being written while it is.
  CheckJobs(client, cycle, restart, job_timeout, outcomes);
  CheckDataDir(cycle);
  CheckDatasets(client, cycle, outcomes);
  CheckSnapshots(client, cycle, outcomes);
}

std::set<std::string> StoreModel::IdsInStore(int cycle,
                                             const std::string& table,
                                             const std::string& column) {
  std::set<std::string> ids;
  const std::string path = data_dir_ + "/metadata.db";
  sqlite3* db = nullptr;
  // Read-only, beside the server (WAL: readers never block it).
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) !=
      SQLITE_OK) {
    AddViolation(cycle, "disk",
                 absl::StrCat("cannot open ", path, ": ", sqlite3_errmsg(db)));
    sqlite3_close_v2(db);
    return ids;
  }
  sqlite3_busy_timeout(db, 5000);
  // Constant table and column names only.
  const std::string sql = absl::StrCat("SELECT ", column, " FROM ", table);
  sqlite3_stmt* statement = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) ==
      SQLITE_OK) {
    while (sqlite3_step(statement) == SQLITE_ROW) {
      ids.insert(
          reinterpret_cast<const char*>(sqlite3_column_text(statement, 0)));
    }
  } else {
    AddViolation(cycle, "disk",
                 absl::StrCat("cannot list ", table, " of ", path, ": ",
                              sqlite3_errmsg(db)));
  }
  sqlite3_finalize(statement);
  sqlite3_close_v2(db);
  return ids;
}

void StoreModel::CheckDataDir(int cycle) {
  namespace fs = std::filesystem;
  std::error_code error;
  for (fs::recursive_directory_iterator it(data_dir_, error), end;
       !error && it != end; it.increment(error)) {
    if (!it->is_regular_file()) continue;
    const std::string path = it->path().string();
    if (absl::EndsWith(path, ".tmp")) {
      AddViolation(cycle, "disk",
                   absl::StrCat("a temporary file survived the restart: ", path,
                                " (", it->file_size(), " bytes)"));
    }
  }
  if (error) {
    AddViolation(
        cycle, "disk",
        absl::StrCat("cannot list ", data_dir_, ": ", error.message()));
  }
}

void StoreModel::CheckVersion(client::BnnClient& client, int cycle,
                              const TrackedDataset& dataset, int64_t version) {
  const VersionExpect& expect = dataset.versions[version - 1];
  const absl::StatusOr<v1::DatasetInfo> info =
      client.GetDataset(dataset.id, version);
  const std::string what = absl::StrCat("dataset ", dataset.id, " ('",
                                        dataset.name, "') version ", version);
  if (!info.ok()) {
    AddViolation(cycle, "lost",
                 absl::StrCat(what, " was acknowledged but GetDataset fails: ",
                              info.status().ToString()));
    return;
  }
  const std::vector<double> classes(info->class_values().begin(),
                                    info->class_values().end());
  if (info->version() != version || info->num_rows() != expect.num_rows ||
      info->hash() != expect.hash ||
      info->num_features() != dataset.schema.num_features ||
      info->name() != dataset.name || classes != dataset.schema.class_values) {
    AddViolation(
        cycle, "changed",
        absl::StrCat(what, " holds version ", info->version(), ", ",
                     info->num_rows(), " rows x ", info->num_features(),
                     " features, ", classes.size(), " classes, hash ",
                     info->hash(), "; acknowledged ", expect.num_rows,
                     " rows x ", dataset.schema.num_features, " features, ",
                     dataset.schema.class_values.size(), " classes, hash ",
                     expect.hash));
  }
}

void StoreModel::CheckDatasets(client::BnnClient& client, int cycle,
                               Outcomes* outcomes) {
  std::set<std::string> visible = IdsInStore(cycle, "datasets", "dataset_id");
  if (absl::StatusOr<std::vector<v1::DatasetInfo>> listed =
          client.ListDatasets();
      listed.ok()) {
    for (const v1::DatasetInfo& info : *listed) {
      visible.insert(info.dataset_id());
    }
  } else {
    AddViolation(
        cycle, "lost",
        absl::StrCat("ListDatasets fails: ", listed.status().ToString()));
  }

  for (auto& [id, dataset] : datasets_) {
    const int64_t acked = static_cast<int64_t>(dataset.versions.size());
    for (int64_t v = 1; v <= acked; ++v)
      CheckVersion(client, cycle, dataset, v);
    const absl::StatusOr<v1::DatasetInfo> latest = client.GetDataset(id);
    if (!latest.ok()) {
      // An unreadable version after the acknowledged ones: an in-doubt
      // append left half-written.
      AddViolation(cycle, "partial",
                   absl::StrCat("dataset ", id, ": its latest version cannot ",
                                "be read: ", latest.status().ToString()));
      continue;
    }
    for (int64_t v = acked + 1; v <= latest->version(); ++v) {
      const auto pending =
          std::find_if(pending_appends_.begin(), pending_appends_.end(),
                       [&](const PendingAppend& p) {
                         return p.dataset_id == id && p.version == v;
                       });
      const absl::StatusOr<v1::DatasetInfo> info = client.GetDataset(id, v);
      if (pending == pending_appends_.end()) {
        AddViolation(cycle, "unknown",
                     absl::StrCat("dataset ", id, " has version ", v,
                                  ", which no append created (", acked,
                                  " acknowledged): ",
                                  info.ok() ? info->ShortDebugString()
                                            : info.status().ToString()));
        break;
      }
      if (!info.ok() || info->num_rows() != pending->expect.num_rows ||
          info->hash() != pending->expect.hash) {
        AddViolation(
            cycle, "partial",
            absl::StrCat("dataset ", id, " version ", v,
                         " of an append in flight at the kill is visible as ",
                         info.ok() ? absl::StrCat(info->num_rows(),
                                                  " rows, hash ", info->hash())
                                   : info.status().ToString(),
                         "; sent ", pending->expect.num_rows, " rows, hash ",
                         pending->expect.hash));
        pending_appends_.erase(pending);
        break;
      }
      dataset.versions.push_back(pending->expect);
      dataset.hasher = pending->hasher;
      ++outcomes->committed[Index(OpKind::kAppend)];
      pending_appends_.erase(pending);
    }
  }
  outcomes->not_committed[Index(OpKind::kAppend)] += pending_appends_.size();
  pending_appends_.clear();

  for (const std::string& id : visible) {
    if (datasets_.count(id) > 0) continue;
    const absl::StatusOr<v1::DatasetInfo> info = client.GetDataset(id);
    if (!info.ok()) {
      AddViolation(cycle, "partial",
                   absl::StrCat("dataset ", id, " is on disk but unreadable: ",
                                info.status().ToString()));
      continue;
    }
    const auto pending = std::find_if(
        pending_uploads_.begin(), pending_uploads_.end(),
        [&](const PendingUpload& p) { return p.name == info->name(); });
    if (pending == pending_uploads_.end()) {
      AddViolation(
          cycle, "unknown",
          absl::StrCat("dataset ", id, " '", info->name(),
                       "' was uploaded by nobody: ", info->ShortDebugString()));
      continue;
    }
    if (info->version() != 1 || info->num_rows() != pending->expect.num_rows ||
        info->hash() != pending->expect.hash ||
        info->num_features() != pending->schema.num_features) {
      AddViolation(
          cycle, "partial",
          absl::StrCat("dataset ", id, " '", info->name(),
                       "' of an upload in flight at the kill is visible as "
                       "version ",
                       info->version(), " with ", info->num_rows(),
                       " rows, hash ", info->hash(), "; sent ",
                       pending->expect.num_rows, " rows, hash ",
                       pending->expect.hash));
      pending_uploads_.erase(pending);
      continue;
    }
    datasets_.emplace(id, TrackedDataset{id,
                                         pending->name,
                                         pending->schema,
                                         {pending->expect},
                                         pending->hasher});
    ++outcomes->committed[Index(OpKind::kUpload)];
    pending_uploads_.erase(pending);
  }
  outcomes->not_committed[Index(OpKind::kUpload)] += pending_uploads_.size();
  pending_uploads_.clear();
}

void StoreModel::CheckJobs(client::BnnClient& client, int cycle,
                           std::optional<Restart> restart,
                           absl::Duration job_timeout, Outcomes* outcomes) {
  // Jobs no client heard of: a StartTraining in flight at the kill.
  for (const std::string& id : IdsInStore(cycle, "jobs", "job_id")) {
    if (jobs_.count(id) > 0) continue;
    const absl::StatusOr<v1::Job> job = client.GetJob(id);
    if (!job.ok()) {
      AddViolation(cycle, "partial",
                   absl::StrCat("job ", id, " is on disk but unreadable: ",
                                job.status().ToString()));
      continue;
    }
    const uint64_t seed = JobSeed(*job);
    const auto pending = std::find_if(
        pending_jobs_.begin(), pending_jobs_.end(), [&](const PendingJob& p) {
          return p.seed == seed && p.dataset_id == job->dataset_id();
        });
    if (pending == pending_jobs_.end()) {
      AddViolation(cycle, "unknown",
                   absl::StrCat("job ", Describe(*job), " (seed ", seed,
                                ") was started by nobody"));
      continue;
    }
    AckJob(id, seed, job->dataset_id());
    ++outcomes->committed[Index(OpKind::kTrain)];
    pending_jobs_.erase(pending);
  }
  outcomes->not_committed[Index(OpKind::kTrain)] += pending_jobs_.size();
  pending_jobs_.clear();

  // Every job reaches a terminal state: queued ones run, none stays RUNNING.
  std::map<std::string, v1::Job> now;
  std::set<std::string> unreadable;
  const absl::Time deadline = absl::Now() + job_timeout;
  while (true) {
    bool waiting = false;
    for (const auto& [id, job] : jobs_) {
      const auto it = now.find(id);
      if (unreadable.count(id) > 0 ||
          (it != now.end() && client::IsTerminal(it->second.state()))) {
        continue;
      }
      const absl::StatusOr<v1::Job> got = client.GetJob(id);
      if (!got.ok()) {
        AddViolation(cycle, "lost",
                     absl::StrCat("job ", id,
                                  " was acknowledged but GetJob "
                                  "fails: ",
                                  got.status().ToString()));
        unreadable.insert(id);
        continue;
      }
      now[id] = *got;
      waiting = waiting || !client::IsTerminal(got->state());
    }
    if (!waiting || absl::Now() >= deadline) break;
    absl::SleepFor(kJobPoll);
  }

  // Jobs that started after the restart were queued at the kill; a
  // snapshot adopted on restart finishes its job at the restart.
  const int64_t kill_ms = restart.has_value()
                              ? absl::ToUnixMillis(restart->kill_time)
                              : std::numeric_limits<int64_t>::min();
  const int64_t start_ms = restart.has_value()
                               ? absl::ToUnixMillis(restart->start_time)
                               : std::numeric_limits<int64_t>::min();
  int interrupted = 0;
  std::vector<std::string> interrupted_ids;
  for (auto& [id, job] : jobs_) {
    if (unreadable.count(id) > 0) continue;
    const v1::Job before = job.last_seen;
    const v1::Job& after = now[id];
    if (client::IsTerminal(before.state())) {
      if (after.state() != before.state() ||
          after.snapshot_id() != before.snapshot_id() ||
          after.error() != before.error()) {
        AddViolation(
            cycle, "changed",
            absl::StrCat("job ", Describe(before),
                         " finished before the kill; now ", Describe(after)));
      }
      continue;
    }
    if (!client::IsTerminal(after.state())) {
      AddViolation(cycle, "stuck",
                   absl::StrCat("job ", Describe(after), " is not finished ",
                                absl::FormatDuration(job_timeout),
                                " after the restart"));
      job.last_seen = after;
      continue;
    }
    job.last_seen = after;
    if (!restart.has_value()) {
      if (after.state() != v1::JOB_STATE_SUCCEEDED) {
        AddViolation(cycle, "job",
                     absl::StrCat("job ", Describe(after),
                                  " did not succeed without any kill"));
      }
      continue;
    }
    switch (after.state()) {
      case v1::JOB_STATE_SUCCEEDED:
        if (after.started_unix_ms() >= start_ms) {
          ++outcomes->jobs_queued_then_run;
        } else if (after.started_unix_ms() < kill_ms &&
                   after.finished_unix_ms() >= start_ms) {
          ++outcomes->jobs_adopted;
          ++interrupted;
          interrupted_ids.push_back(id);
        }
        break;
      case v1::JOB_STATE_FAILED:
        if (after.error() != kRestartedJobError) {
          AddViolation(cycle, "job",
                       absl::StrCat("job ", Describe(after), " failed"));
          break;
        }
        ++outcomes->jobs_failed_by_restart;
        ++interrupted;
        interrupted_ids.push_back(id);
        if (after.started_unix_ms() == 0 ||
            after.started_unix_ms() >= start_ms) {
          AddViolation(
              cycle, "job",
              absl::StrCat("job ", Describe(after),
                           " is failed by the restart but was not "
                           "running before the kill (kill at ms ",
                           kill_ms, ", restart at ms ", start_ms, ")"));
        }
        break;
      default:
        AddViolation(cycle, "job",
                     absl::StrCat("job ", Describe(after),
                                  " ended in a state nothing asked for"));
    }
  }
  if (interrupted > max_concurrent_jobs_) {
    AddViolation(
        cycle, "job",
        absl::StrCat(
            interrupted, " jobs were interrupted by one kill (",
            absl::StrJoin(interrupted_ids, ", "),
            "); at most --max-concurrent-jobs = ", max_concurrent_jobs_,
            " run at once, so a queued job was failed"));
  }
}

void StoreModel::TrackSnapshot(client::BnnClient& client, int cycle,
                               const std::string& snapshot_id,
                               std::string origin) {
  const absl::StatusOr<v1::SnapshotInfo> info = client.GetSnapshot(snapshot_id);
  if (!info.ok()) {
    AddViolation(cycle, "lost",
                 absl::StrCat("snapshot ", snapshot_id, " of ", origin,
                              " cannot be read: ", info.status().ToString()));
    return;
  }
  absl::StatusOr<std::vector<double>> fingerprint =
      PredictFingerprint(client, snapshot_id, info->num_features());
  if (!fingerprint.ok()) {
    AddViolation(
        cycle, "lost",
        absl::StrCat("snapshot ", snapshot_id, " of ", origin,
                     " does not predict: ", fingerprint.status().ToString()));
    return;
  }
  TrackedSnapshot& snapshot = snapshots_[snapshot_id];
  snapshot.origin = std::move(origin);
  snapshot.num_features = info->num_features();
  snapshot.size_bytes = info->size_bytes();
  snapshot.fingerprint = *std::move(fingerprint);
}

void StoreModel::CheckSnapshots(client::BnnClient& client, int cycle,
                                Outcomes* outcomes) {
  // Snapshots of jobs that succeeded since the last check.
  for (const auto& [id, job] : jobs_) {
    const std::string& snapshot_id = job.last_seen.snapshot_id();
    if (job.last_seen.state() != v1::JOB_STATE_SUCCEEDED ||
        snapshots_.count(snapshot_id) > 0) {
      continue;
    }
    TrackSnapshot(client, cycle, snapshot_id, absl::StrCat("job ", id));
  }

  std::set<std::string> visible = IdsInStore(cycle, "snapshots", "snapshot_id");
  if (absl::StatusOr<std::vector<v1::SnapshotInfo>> listed =
          client.ListSnapshots();
      listed.ok()) {
    for (const v1::SnapshotInfo& info : *listed) {
      visible.insert(info.snapshot_id());
    }
  } else {
    AddViolation(
        cycle, "lost",
        absl::StrCat("ListSnapshots fails: ", listed.status().ToString()));
  }

  // Acknowledged snapshots: same size, same predictions.
  std::vector<std::string> reexport;
  for (auto& [id, snapshot] : snapshots_) {
    const absl::StatusOr<v1::SnapshotInfo> info = client.GetSnapshot(id);
    if (!info.ok()) {
      AddViolation(cycle, "lost",
                   absl::StrCat("snapshot ", id, " (", snapshot.origin,
                                ") was acknowledged but GetSnapshot fails: ",
                                info.status().ToString()));
      continue;
    }
    if (info->size_bytes() != snapshot.size_bytes) {
      AddViolation(cycle, "changed",
                   absl::StrCat("snapshot ", id, " (", snapshot.origin,
                                ") has ", info->size_bytes(), " bytes; ",
                                snapshot.size_bytes, " acknowledged"));
    }
    const absl::StatusOr<std::vector<double>> fingerprint =
        PredictFingerprint(client, id, snapshot.num_features);
    if (!fingerprint.ok()) {
      AddViolation(cycle, "lost",
                   absl::StrCat("snapshot ", id, " (", snapshot.origin,
                                ") does not predict: ",
                                fingerprint.status().ToString()));
    } else if (*fingerprint != snapshot.fingerprint) {
      AddViolation(
          cycle, "changed",
          absl::StrCat("snapshot ", id, " (", snapshot.origin, ") predicts ",
                       DescribeFingerprint(*fingerprint), "; before ",
                       DescribeFingerprint(snapshot.fingerprint)));
    }
    if (snapshot.sha256.empty() || new_imports_.count(id) > 0) {
      reexport.push_back(id);
    }
  }
  // And a few older ones in turn: their bytes.
  if (!snapshots_.empty()) {
    for (int i = 0; i < kReexportsPerVerify; ++i) {
      export_cursor_ = (export_cursor_ + 1) % snapshots_.size();
      reexport.push_back(std::next(snapshots_.begin(), export_cursor_)->first);
    }
  }
  for (const std::string& id : reexport) {
    TrackedSnapshot& snapshot = snapshots_.at(id);
    const absl::StatusOr<std::string> bytes = client.ExportSnapshotToString(id);
    if (!bytes.ok()) {
      AddViolation(
          cycle, "lost",
          absl::StrCat("snapshot ", id, " (", snapshot.origin,
                       ") cannot be exported: ", bytes.status().ToString()));
      continue;
    }
    const std::string sha = Sha256Hex(*bytes);
    if (snapshot.sha256.empty()) {
      snapshot.sha256 = sha;
    } else if (sha != snapshot.sha256) {
      AddViolation(cycle, "changed",
                   absl::StrCat("snapshot ", id, " (", snapshot.origin,
                                ") exports ", bytes->size(), " bytes, SHA-256 ",
                                sha, "; acknowledged ", snapshot.size_bytes,
                                " bytes, SHA-256 ", snapshot.sha256));
    }
  }
  new_imports_.clear();

  // Snapshots nobody acknowledged: an import in flight at the kill, whole.
  for (const std::string& id : visible) {
    if (snapshots_.count(id) > 0) continue;
    const absl::StatusOr<v1::SnapshotInfo> info = client.GetSnapshot(id);
    const absl::StatusOr<std::string> bytes = client.ExportSnapshotToString(id);
    if (!info.ok() || !bytes.ok()) {
      AddViolation(
          cycle, "partial",
          absl::StrCat(
              "snapshot ", id, " is on disk but unreadable: ",
              (info.ok() ? bytes.status() : info.status()).ToString()));
      continue;
    }
    const std::string sha = Sha256Hex(*bytes);
    const auto pending = std::find_if(
        pending_imports_.begin(), pending_imports_.end(),
        [&](const ImportSource* source) { return source->sha256 == sha; });
    if (pending == pending_imports_.end()) {
      AddViolation(
          cycle, "unknown",
          absl::StrCat("snapshot ", id, " (", bytes->size(), " bytes, dataset ",
                       info->dataset_id(), ", seed ", info->seed(),
                       ") was imported by nobody and belongs to no job"));
      continue;
    }
    const ImportSource& source = **pending;
    pending_imports_.erase(pending);
    TrackedSnapshot& snapshot = snapshots_[id];
    snapshot.origin = absl::StrCat("import of ", source.name, " (in doubt)");
    snapshot.num_features = source.num_features;
    snapshot.size_bytes = static_cast<int64_t>(source.bytes.size());
    snapshot.sha256 = source.sha256;
    snapshot.fingerprint = source.fingerprint;
    ++outcomes->committed[Index(OpKind::kImport)];
    const absl::StatusOr<std::vector<double>> fingerprint =
        PredictFingerprint(client, id, snapshot.num_features);
    if (!fingerprint.ok() || *fingerprint != snapshot.fingerprint) {
      AddViolation(
          cycle, "partial",
          absl::StrCat("snapshot ", id, " (", snapshot.origin,
                       ") does not predict as its source: ",
                       fingerprint.ok() ? DescribeFingerprint(*fingerprint)
                                        : fingerprint.status().ToString()));
    }
  }
  outcomes->not_committed[Index(OpKind::kImport)] += pending_imports_.size();
  pending_imports_.clear();
}

}  // namespace bnn::faults
