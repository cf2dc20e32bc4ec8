#include "server/store/dataset_store.h"

#include <algorithm>
#include <utility>

#include <absl/cleanup/cleanup.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/data/dataset_hash.h"
#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/store/dataset_file.h"
#include "server/store/ids.h"
#include "server/store/job_store.h"
#include "server/store/record_dir.h"
#include "server/store/snapshot_store.h"

namespace bnn::server {
namespace {

constexpr absl::string_view kExtension = ".dataset";
// Between the id and the version number in the file names of versions >= 2.
constexpr absl::string_view kVersionMark = ".v";

// The dataset id and version of a file stem as PathOf names them: "<id>"
// for version 1, "<id>.v<N>" for version N >= 2.
bool ParseStem(absl::string_view stem, std::string* id, int64_t* version) {
  if (IsId(kDatasetIdPrefix, stem)) {
    *id = std::string(stem);
    *version = 1;
    return true;
  }
  const size_t mark = stem.rfind(kVersionMark);
  if (mark == absl::string_view::npos) return false;
  const absl::string_view number = stem.substr(mark + kVersionMark.size());
  int64_t parsed = 0;
  // Only the canonical spelling, so that one version has one file name.
  if (!absl::SimpleAtoi(number, &parsed) || parsed < 2 ||
      absl::StrCat(parsed) != number ||
      !IsId(kDatasetIdPrefix, stem.substr(0, mark))) {
    return false;
  }
  *id = std::string(stem.substr(0, mark));
  *version = parsed;
  return true;
}

// Ids of each kind that CheckDatasetUnused names at most.
constexpr size_t kMaxNamed = 10;

// Ids of the temporary files of versions being received.
constexpr absl::string_view kIncomingPrefix = "incoming";

absl::Status UnknownDataset(absl::string_view dataset_id) {
  return absl::NotFoundError(
      absl::StrCat("dataset_id '", dataset_id, "' not found"));
}

// Keeps the column ranges after a version's rows with it, so that the next
// append checks the whole dataset without reading it.
void SetRanges(const ColumnRanges& ranges, store::DatasetMeta* meta) {
  meta->mutable_range_min()->Assign(ranges.min().begin(), ranges.min().end());
  meta->mutable_range_max()->Assign(ranges.max().begin(), ranges.max().end());
}

}  // namespace

absl::Status CheckExpectedVersion(const store::DatasetMeta& latest,
                                  std::optional<int64_t> expected_version) {
  if (expected_version.has_value() && *expected_version != latest.version()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset_id '", latest.dataset_id(), "' is at version ",
        latest.version(), "; the append expected version ", *expected_version));
  }
  return absl::OkStatus();
}

absl::Status CheckDatasetUnused(absl::string_view dataset_id,
                                const SnapshotStore& snapshots,
                                const JobStore& jobs) {
  const auto named = [](const std::vector<std::string>& ids) {
    std::string out = absl::StrJoin(
        ids.begin(), ids.begin() + std::min(ids.size(), kMaxNamed), ", ");
    if (ids.size() > kMaxNamed) {
      absl::StrAppend(&out, " and ", ids.size() - kMaxNamed, " more");
    }
    return out;
  };
  std::vector<std::string> snapshot_ids;
  for (const store::SnapshotMeta& meta : snapshots.List()) {
    if (meta.dataset_id() == dataset_id) {
      snapshot_ids.push_back(meta.snapshot_id());
    }
  }
  std::vector<std::string> job_ids;
  for (const store::JobRecord& job : jobs.List()) {
    if (job.dataset_id() == dataset_id &&
        (job.state() == store::JobRecord::QUEUED ||
         job.state() == store::JobRecord::RUNNING)) {
      job_ids.push_back(job.job_id());
    }
  }
  if (snapshot_ids.empty() && job_ids.empty()) return absl::OkStatus();
  std::vector<std::string> uses;
  if (!snapshot_ids.empty()) {
    uses.push_back(absl::StrCat("snapshots ", named(snapshot_ids)));
  }
  if (!job_ids.empty()) {
    uses.push_back(absl::StrCat("queued or running jobs ", named(job_ids)));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "dataset_id '", dataset_id, "' is used by ", absl::StrJoin(uses, " and "),
      "; delete or cancel them first, or set force (snapshots stay usable; "
      "queued jobs fail)"));
}

absl::StatusOr<std::unique_ptr<DatasetStore>> DatasetStore::Open(
    std::string dir) {
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> stems,
                       ScanRecordStems(dir, kExtension));
  std::unique_ptr<DatasetStore> store(new DatasetStore(std::move(dir)));
  absl::MutexLock lock(&store->mu_);
  for (const std::string& stem : stems) {
    std::string id;
    int64_t version = 0;
    if (!ParseStem(stem, &id, &version)) continue;
    const std::string path = store->PathOf(id, version);
    Entry& entry = store->datasets_[id][version];
    absl::StatusOr<DatasetFileContents> read = ReadDatasetFile(path);
    if (read.ok() &&
        (read->meta.dataset_id() != id || read->meta.version() != version)) {
      read = absl::DataLossError(
          absl::StrCat(path, ": holds dataset_id '", read->meta.dataset_id(),
                       "' version ", read->meta.version()));
    }
    if (read.ok()) {
      entry.meta = std::move(read->meta);
    } else {
      spdlog::error("dataset {} version {} is unreadable: {}", id, version,
                    read.status().ToString());
      entry.status = read.status();
      entry.meta.set_dataset_id(id);
      entry.meta.set_version(version);
    }
  }
  for (auto& [id, versions] : store->datasets_) {
    store->CheckVersionChain(id, &versions);
  }
  return store;
}

void DatasetStore::CheckVersionChain(absl::string_view dataset_id,
                                     Versions* versions) const {
  int64_t expected = 1;
  int64_t rows_before = 0;
  // Once set, why every later version cannot be read.
  std::string broken;
  for (auto& [version, entry] : *versions) {
    if (broken.empty() && version != expected) {
      broken = absl::StrCat("version ", expected, " is missing");
    }
    if (broken.empty() && entry.status.ok() &&
        entry.meta.first_row() != rows_before) {
      entry.status = absl::DataLossError(
          absl::StrCat(PathOf(dataset_id, version), ": starts at row ",
                       entry.meta.first_row(), "; version ", version - 1,
                       " has ", rows_before, " rows"));
    }
    if (!broken.empty()) {
      if (entry.status.ok()) {
        entry.status = absl::DataLossError(
            absl::StrCat("dataset_id '", dataset_id, "' version ", version,
                         " cannot be read: ", broken));
        spdlog::error("{}", entry.status.ToString());
      }
      continue;
    }
    if (!entry.status.ok()) {
      broken = absl::StrCat("it builds on version ", version,
                            ", which is unreadable");
      continue;
    }
    rows_before = entry.meta.num_rows();
    ++expected;
  }
}

std::string DatasetStore::PathOf(absl::string_view dataset_id,
                                 int64_t version) const {
  if (version == 1) return absl::StrCat(dir_, "/", dataset_id, kExtension);
  return absl::StrCat(dir_, "/", dataset_id, kVersionMark, version, kExtension);
}

absl::StatusOr<std::unique_ptr<DatasetFileWriter>>
DatasetStore::NewVersionWriter(int64_t num_features) const {
  return DatasetFileWriter::Create(
      absl::StrCat(dir_, "/", NewId(kIncomingPrefix), kTempSuffix),
      num_features);
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Create(
    const Dataset& data, absl::string_view name) {
  BNN_RETURN_IF_ERROR(data.Validate());
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<DatasetFileWriter> writer,
                       NewVersionWriter(data.num_features));
  BNN_RETURN_IF_ERROR(writer->AddRows(data.features, data.targets));
  return Commit(std::move(writer), data, name, /*encode_labels=*/false);
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Create(
    std::unique_ptr<DatasetFileWriter> rows, const Dataset& schema,
    absl::string_view name) {
  return Commit(std::move(rows), schema, name,
                /*encode_labels=*/IsClassification(schema.task));
}

const std::string& DatasetStore::NameOf(const Versions& versions) {
  static const std::string* const kUnreadable = new std::string();
  for (const auto& [version, entry] : versions) {
    if (entry.status.ok()) return entry.meta.name();
  }
  return *kUnreadable;
}

absl::StatusOr<std::string> DatasetStore::ResolveLocked(
    absl::string_view dataset_id) const {
  if (datasets_.count(dataset_id) > 0) return std::string(dataset_id);
  // Unreadable datasets have no name.
  if (dataset_id.empty()) return UnknownDataset(dataset_id);
  std::vector<std::string> named;
  for (const auto& [id, versions] : datasets_) {
    if (NameOf(versions) == dataset_id) named.push_back(id);
  }
  if (named.empty()) return UnknownDataset(dataset_id);
  if (named.size() > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dataset name '", dataset_id, "' is ambiguous: datasets ",
        absl::StrJoin(named, ", "),
        " have it (stored by an older server, before names were unique); "
        "name one by its id"));
  }
  return named.front();
}

absl::StatusOr<std::string> DatasetStore::ResolveId(
    absl::string_view dataset_id) const {
  absl::MutexLock lock(&mu_);
  return ResolveLocked(dataset_id);
}

absl::Status DatasetStore::CheckNameFree(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, versions] : datasets_) {
    if (NameOf(versions) == name) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a dataset named '", name, "' exists: ", id,
          "; dataset names are unique (append to it, or delete it first)"));
    }
  }
  if (reserved_names_.count(name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a dataset named '", name, "' is being stored by another upload"));
  }
  return absl::OkStatus();
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Commit(
    std::unique_ptr<DatasetFileWriter> rows, const Dataset& schema,
    absl::string_view name, bool encode_labels) {
  if (rows->num_rows() == 0) {
    return absl::InvalidArgumentError("a dataset needs at least one row");
  }
  // The name is held from the check until the dataset is indexed.
  BNN_RETURN_IF_ERROR(CheckNameFree(name));
  {
    absl::MutexLock lock(&mu_);
    if (!reserved_names_.emplace(name).second) return CheckNameFree(name);
  }
  absl::Cleanup release = [this, name] {
    absl::MutexLock lock(&mu_);
    reserved_names_.erase(reserved_names_.find(name));
  };
  // One pass over the rows as written: class labels become class indices,
  // and the hash takes in the rows.
  DatasetHasher hasher(schema.task, schema.num_features);
  ColumnRanges ranges(schema.num_features, !IsClassification(schema.task));
  const std::vector<double>& classes = schema.class_values;
  BNN_RETURN_IF_ERROR(rows->ForEachBlock(
      [&](absl::Span<const double> features,
          absl::Span<double> targets) -> absl::Status {
        ranges.AddRows(features.data(), targets.data(),
                       static_cast<int64_t>(targets.size()));
        if (encode_labels) {
          for (double& y : targets) {
            const int64_t index = ClassIndex(classes, y);
            if (index < 0) {
              return absl::InternalError(
                  absl::StrCat("label ", y, " is not among the dataset's ",
                               classes.size(), " class values"));
            }
            y = static_cast<double>(index);
          }
        }
        hasher.AddRows(features.data(), targets.data(),
                       static_cast<int64_t>(targets.size()));
        return absl::OkStatus();
      },
      /*write_back=*/encode_labels));
  BNN_RETURN_IF_ERROR(ranges.Check());

  store::DatasetMeta meta;
  {
    absl::MutexLock lock(&mu_);
    do {
      meta.set_dataset_id(NewId(kDatasetIdPrefix));
    } while (datasets_.count(meta.dataset_id()) > 0);
  }
  meta.set_version(1);
  meta.set_name(std::string(name));
  meta.set_task(std::string(TaskToString(schema.task)));
  meta.set_num_rows(rows->num_rows());
  meta.set_num_features(static_cast<int32_t>(schema.num_features));
  meta.set_num_classes(schema.num_classes);
  meta.mutable_class_values()->Add(classes.begin(), classes.end());
  for (const std::string& feature : schema.feature_names) {
    meta.add_feature_names(feature);
  }
  meta.set_target_name(schema.target_name);
  meta.set_hash(hasher.HexDigest(classes));
  meta.set_hash_state(hasher.State());
  SetRanges(ranges, &meta);
  meta.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  // Written outside the lock: large files must not stall lookups.
  BNN_RETURN_IF_ERROR(rows->Commit(meta, PathOf(meta.dataset_id(), 1)));
  absl::MutexLock lock(&mu_);
  datasets_[meta.dataset_id()][1] = Entry{absl::OkStatus(), meta};
  return meta;
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Append(
    absl::string_view dataset_id, const Dataset& rows,
    std::optional<int64_t> expected_version) {
  BNN_RETURN_IF_ERROR(rows.Validate());
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta latest, Get(dataset_id));
  BNN_ASSIGN_OR_RETURN(const Dataset schema, DatasetSchema(latest));
  BNN_RETURN_IF_ERROR(schema.CheckSameSchema(rows));
  BNN_ASSIGN_OR_RETURN(std::unique_ptr<DatasetFileWriter> writer,
                       NewVersionWriter(rows.num_features));
  BNN_RETURN_IF_ERROR(writer->AddRows(rows.features, rows.targets));
  return Append(latest.dataset_id(), std::move(writer), expected_version);
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Append(
    absl::string_view dataset_id, std::unique_ptr<DatasetFileWriter> rows,
    std::optional<int64_t> expected_version) {
  absl::MutexLock append_lock(&append_mu_);
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta latest, Get(dataset_id));
  const std::string& id = latest.dataset_id();  // dataset_id may be a name
  BNN_RETURN_IF_ERROR(CheckExpectedVersion(latest, expected_version));
  if (rows->num_rows() == 0) {
    return absl::InvalidArgumentError("an append needs at least one row");
  }
  if (rows->num_features() != latest.num_features()) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema mismatch: appending ", rows->num_features(),
                     " features to ", latest.num_features()));
  }
  BNN_ASSIGN_OR_RETURN(RowsState state, StateAfter(latest));
  DatasetHasher& hasher = state.hasher;
  BNN_RETURN_IF_ERROR(rows->ForEachBlock(
      [&](absl::Span<const double> features, absl::Span<double> targets) {
        hasher.AddRows(features.data(), targets.data(),
                       static_cast<int64_t>(targets.size()));
        state.ranges.AddRows(features.data(), targets.data(),
                             static_cast<int64_t>(targets.size()));
        return absl::OkStatus();
      },
      /*write_back=*/false));
  // The whole dataset, old rows and new, must stay standardisable.
  BNN_RETURN_IF_ERROR(state.ranges.Check());

  store::DatasetMeta meta = latest;
  meta.set_version(latest.version() + 1);
  meta.set_first_row(latest.num_rows());
  meta.set_num_rows(latest.num_rows() + rows->num_rows());
  meta.set_hash(
      hasher.HexDigest({latest.class_values().data(),
                        static_cast<size_t>(latest.class_values_size())}));
  meta.set_hash_state(hasher.State());
  SetRanges(state.ranges, &meta);
  meta.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  BNN_RETURN_IF_ERROR(rows->Commit(meta, PathOf(id, meta.version())));
  absl::MutexLock lock(&mu_);
  datasets_.find(id)->second[meta.version()] = Entry{absl::OkStatus(), meta};
  return meta;
}

absl::StatusOr<DatasetStore::RowsState> DatasetStore::StateAfter(
    const store::DatasetMeta& meta) const {
  BNN_ASSIGN_OR_RETURN(const Task task, StringToTask(meta.task()));
  const bool with_target = !IsClassification(task);
  if (!meta.hash_state().empty() && meta.range_min_size() > 0) {
    absl::StatusOr<DatasetHasher> hasher =
        DatasetHasher::FromState(meta.hash_state(), meta.num_features());
    absl::StatusOr<ColumnRanges> ranges = ColumnRanges::FromMinMax(
        meta.num_features(), with_target,
        {meta.range_min().begin(), meta.range_min().end()},
        {meta.range_max().begin(), meta.range_max().end()});
    if (hasher.ok() && hasher->num_rows() == meta.num_rows() && ranges.ok()) {
      return RowsState{*std::move(hasher), *std::move(ranges)};
    }
  }
  // A version written before these were kept (or with a bad state): read
  // its rows once; the new version keeps the state.
  BNN_ASSIGN_OR_RETURN(const Dataset data,
                       Load(meta.dataset_id(), meta.version()));
  RowsState state{DatasetHasher(data.task, data.num_features),
                  ColumnRanges(data.num_features, with_target)};
  state.hasher.AddRows(data.features.data(), data.targets.data(),
                       data.num_rows());
  state.ranges.AddRows(data.features.data(), data.targets.data(),
                       data.num_rows());
  return state;
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Get(
    absl::string_view dataset_id, std::optional<int64_t> version) const {
  absl::MutexLock lock(&mu_);
  BNN_ASSIGN_OR_RETURN(const std::string id, ResolveLocked(dataset_id));
  const Versions& versions = datasets_.find(id)->second;
  const auto entry =
      version.has_value() ? versions.find(*version) : std::prev(versions.end());
  if (entry == versions.end()) {
    return absl::NotFoundError(
        absl::StrCat("dataset_id '", dataset_id, "' has no version ", *version,
                     " (its latest is ", versions.rbegin()->first, ")"));
  }
  if (!entry->second.status.ok()) return entry->second.status;
  return entry->second.meta;
}

absl::StatusOr<Dataset> DatasetStore::Load(
    absl::string_view dataset_id, std::optional<int64_t> version) const {
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta, Get(dataset_id, version));
  Dataset data;
  for (int64_t v = 1; v <= meta.version(); ++v) {
    const std::string path = PathOf(meta.dataset_id(), v);
    BNN_ASSIGN_OR_RETURN(DatasetFileContents file, ReadDatasetFile(path));
    if (file.meta.version() != v || file.meta.first_row() != data.num_rows()) {
      return absl::DataLossError(absl::StrCat(
          path, ": holds version ", file.meta.version(), " from row ",
          file.meta.first_row(), "; expected version ", v, " from row ",
          data.num_rows()));
    }
    if (v == 1) {
      data = std::move(file.rows);
      data.features.reserve(meta.num_rows() * meta.num_features());
      data.targets.reserve(meta.num_rows());
    } else if (absl::Status appended = data.Append(file.rows); !appended.ok()) {
      // Every version has the schema of version 1; a file that disagrees
      // is corrupt, not a bad request.
      return absl::DataLossError(
          absl::StrCat(path, ": its rows do not extend version ", v - 1, ": ",
                       appended.message()));
    }
  }
  return data;
}

absl::StatusOr<std::unique_ptr<PoolSource>> DatasetStore::OpenRows(
    absl::string_view dataset_id, std::optional<int64_t> version) const {
  BNN_ASSIGN_OR_RETURN(const store::DatasetMeta meta, Get(dataset_id, version));
  std::vector<std::string> paths;
  for (int64_t v = 1; v <= meta.version(); ++v) {
    paths.push_back(PathOf(meta.dataset_id(), v));
  }
  return OpenDatasetRows(paths, meta.num_features(), meta.num_rows());
}

std::vector<store::DatasetMeta> DatasetStore::List() const {
  // (creation of version 1, latest version)
  std::vector<std::pair<int64_t, store::DatasetMeta>> listed;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, versions] : datasets_) {
      const Entry& latest = versions.rbegin()->second;
      if (!latest.status.ok()) continue;
      listed.emplace_back(versions.begin()->second.meta.created_unix_ms(),
                          latest.meta);
    }
  }
  std::stable_sort(
      listed.begin(), listed.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<store::DatasetMeta> out;
  out.reserve(listed.size());
  for (auto& [created, meta] : listed) out.push_back(std::move(meta));
  return out;
}

int64_t DatasetStore::size() const {
  absl::MutexLock lock(&mu_);
  return std::count_if(datasets_.begin(), datasets_.end(), [](const auto& kv) {
    return kv.second.rbegin()->second.status.ok();
  });
}

absl::StatusOr<std::string> DatasetStore::Delete(absl::string_view dataset_id) {
  absl::MutexLock append_lock(&append_mu_);
  std::string id;
  std::vector<int64_t> versions;
  {
    // Forgotten first: later lookups are NotFound, not a half-deleted
    // dataset.
    absl::MutexLock lock(&mu_);
    BNN_ASSIGN_OR_RETURN(id, ResolveLocked(dataset_id));
    const auto it = datasets_.find(id);
    for (const auto& [version, entry] : it->second) versions.push_back(version);
    datasets_.erase(it);
  }
  // Version 1 first: a crash part-way leaves later versions without their
  // base, which the next Open() reports as unreadable (and deletable), never
  // a readable dataset with fewer versions.
  for (const int64_t version : versions) {
    BNN_RETURN_IF_ERROR(RemoveFile(PathOf(id, version)));
  }
  BNN_RETURN_IF_ERROR(SyncDirectory(dir_));
  spdlog::info("dataset {} deleted ({} versions)", id, versions.size());
  return id;
}

}  // namespace bnn::server
