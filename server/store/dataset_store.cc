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

namespace bnn::server {
namespace {

// Ids of each kind that CheckDatasetUnused names at most.
constexpr size_t kMaxNamed = 10;

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
                                MetadataReader& reader) {
  const auto named = [](const std::vector<std::string>& ids, bool more) {
    std::string out = absl::StrJoin(
        ids.begin(), ids.begin() + std::min(ids.size(), kMaxNamed), ", ");
    if (ids.size() > kMaxNamed || more) absl::StrAppend(&out, " and more");
    return out;
  };
  PageRequest page;
  page.page_size = static_cast<int>(kMaxNamed);
  SnapshotFilter snapshot_filter;
  snapshot_filter.dataset_id = std::string(dataset_id);
  BNN_ASSIGN_OR_RETURN(const Page<SnapshotRecord> snapshots,
                       reader.ListSnapshots(snapshot_filter, page));
  // Named oldest first (of the newest few).
  std::vector<std::string> snapshot_ids;
  for (auto s = snapshots.items.rbegin(); s != snapshots.items.rend(); ++s) {
    snapshot_ids.push_back(s->meta.snapshot_id());
  }
  JobFilter job_filter;
  job_filter.dataset_id = std::string(dataset_id);
  job_filter.states = {store::JobRecord::QUEUED, store::JobRecord::RUNNING};
  BNN_ASSIGN_OR_RETURN(const Page<store::JobRecord> jobs,
                       reader.ListJobs(job_filter, page));
  std::vector<std::string> job_ids;
  for (const store::JobRecord& job : jobs.items)
    job_ids.push_back(job.job_id());
  if (snapshot_ids.empty() && job_ids.empty()) return absl::OkStatus();
  std::vector<std::string> uses;
  if (!snapshot_ids.empty()) {
    uses.push_back(absl::StrCat(
        "snapshots ", named(snapshot_ids, !snapshots.next_page_token.empty())));
  }
  if (!job_ids.empty()) {
    uses.push_back(absl::StrCat("queued or running jobs ",
                                named(job_ids, !jobs.next_page_token.empty())));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "dataset_id '", dataset_id, "' is used by ", absl::StrJoin(uses, " and "),
      "; delete or cancel them first, or set force (snapshots stay usable; "
      "queued jobs fail)"));
}

absl::StatusOr<std::unique_ptr<DatasetFileWriter>>
DatasetStore::NewVersionWriter(int64_t num_features) const {
  return DatasetFileWriter::Create(blobs_->NewTempPath(), num_features);
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

absl::StatusOr<std::string> DatasetStore::ResolveId(
    absl::string_view dataset_id) const {
  absl::StatusOr<std::string> id =
      metadata_->Read([&](MetadataReader& r) -> absl::StatusOr<std::string> {
        absl::StatusOr<DatasetVersionRecord> by_id = r.GetDataset(dataset_id);
        if (by_id.ok() || !absl::IsNotFound(by_id.status())) {
          // An unreadable dataset is still named by its id.
          return std::string(dataset_id);
        }
        if (dataset_id.empty()) return by_id.status();
        BNN_ASSIGN_OR_RETURN(const DatasetVersionRecord by_name,
                             r.GetDatasetByName(dataset_id));
        return by_name.meta.dataset_id();
      });
  if (absl::IsNotFound(id.status())) return UnknownDataset(dataset_id);
  return id;
}

absl::Status DatasetStore::CheckNameFree(absl::string_view name) const {
  absl::StatusOr<DatasetVersionRecord> named = metadata_->Read(
      [&](MetadataReader& r) { return r.GetDatasetByName(name); });
  if (named.ok()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a dataset named '", name, "' exists: ", named->meta.dataset_id(),
        "; dataset names are unique (append to it, or delete it first)"));
  }
  if (!absl::IsNotFound(named.status())) return named.status();
  absl::MutexLock lock(&mu_);
  if (reserved_names_.count(name) > 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a dataset named '", name, "' is being stored by another upload"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> DatasetStore::StoreRows(
    std::unique_ptr<DatasetFileWriter> rows, const store::DatasetMeta& meta) {
  // The finished file is adopted by hard link, then its temporary name
  // dropped: the rows are written once.
  const std::string path = blobs_->NewTempPath();
  BNN_RETURN_IF_ERROR(rows->Commit(meta, path));
  absl::StatusOr<std::string> blob = blobs_->Adopt(path);
  const absl::Status removed = RemoveFile(path);
  BNN_RETURN_IF_ERROR(blob.status());
  BNN_RETURN_IF_ERROR(removed);
  return blob;
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Commit(
    std::unique_ptr<DatasetFileWriter> rows, const Dataset& schema,
    absl::string_view name, bool encode_labels) {
  if (rows->num_rows() == 0) {
    return absl::InvalidArgumentError("a dataset needs at least one row");
  }
  // The name is held from the check until the dataset is committed (the
  // metadata store refuses a taken name too, but only after the rows are
  // written).
  if (!name.empty()) {
    BNN_RETURN_IF_ERROR(CheckNameFree(name));
    absl::MutexLock lock(&mu_);
    if (!reserved_names_.emplace(name).second) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a dataset named '", name, "' is being stored by another upload"));
    }
  }
  absl::Cleanup release = [this, name] {
    if (name.empty()) return;
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
  meta.set_dataset_id(NewId(kDatasetIdPrefix));
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
  absl::ReaderMutexLock reference(blobs_->reference_mutex());
  DatasetVersionRecord record{meta, ""};
  BNN_ASSIGN_OR_RETURN(record.rows_blob, StoreRows(std::move(rows), meta));
  BNN_RETURN_IF_ERROR(metadata_->Write(
      [&](MetadataTransaction& tx) { return tx.CreateDataset(record); }));
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
  absl::ReaderMutexLock reference(blobs_->reference_mutex());
  DatasetVersionRecord record{meta, ""};
  BNN_ASSIGN_OR_RETURN(record.rows_blob, StoreRows(std::move(rows), meta));
  BNN_RETURN_IF_ERROR(metadata_->Write(
      [&](MetadataTransaction& tx) { return tx.AddDatasetVersion(record); }));
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

absl::StatusOr<std::vector<DatasetVersionRecord>> DatasetStore::Chain(
    absl::string_view dataset_id, std::optional<int64_t> version) const {
  BNN_ASSIGN_OR_RETURN(const std::string id, ResolveId(dataset_id));
  absl::StatusOr<std::vector<DatasetVersionRecord>> versions = metadata_->Read(
      [&](MetadataReader& r) { return r.ListDatasetVersions(id); });
  if (absl::IsNotFound(versions.status())) return UnknownDataset(dataset_id);
  if (!versions.ok()) {
    return absl::DataLossError(
        absl::StrCat("dataset_id '", dataset_id,
                     "' cannot be read: ", versions.status().message()));
  }
  const int64_t latest = versions->back().meta.version();
  if (version.has_value() && (*version < 1 || *version > latest)) {
    return absl::NotFoundError(absl::StrCat("dataset_id '", dataset_id,
                                            "' has no version ", *version,
                                            " (its latest is ", latest, ")"));
  }
  versions->resize(version.value_or(latest));
  for (const DatasetVersionRecord& v : *versions) {
    if (absl::Status servable = blobs_->CheckNotQuarantined(v.rows_blob);
        !servable.ok()) {
      return absl::DataLossError(
          absl::StrCat("dataset_id '", dataset_id, "' version ",
                       versions->back().meta.version(),
                       " cannot be read: the rows of version ",
                       v.meta.version(), ": ", servable.message()));
    }
  }
  return versions;
}

absl::StatusOr<std::vector<std::string>> DatasetStore::PathsOf(
    const std::vector<DatasetVersionRecord>& chain) const {
  std::vector<std::string> paths;
  for (const DatasetVersionRecord& v : chain) {
    absl::StatusOr<std::string> path = blobs_->PathOf(v.rows_blob);
    if (!path.ok()) {
      return absl::DataLossError(absl::StrCat(
          "dataset_id '", v.meta.dataset_id(), "' version ", v.meta.version(),
          " cannot be read: ", path.status().message()));
    }
    paths.push_back(*std::move(path));
  }
  return paths;
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Get(
    absl::string_view dataset_id, std::optional<int64_t> version) const {
  BNN_ASSIGN_OR_RETURN(std::vector<DatasetVersionRecord> chain,
                       Chain(dataset_id, version));
  return std::move(chain.back().meta);
}

absl::StatusOr<Dataset> DatasetStore::Load(
    absl::string_view dataset_id, std::optional<int64_t> version) const {
  BNN_ASSIGN_OR_RETURN(const std::vector<DatasetVersionRecord> chain,
                       Chain(dataset_id, version));
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> paths, PathsOf(chain));
  const store::DatasetMeta& meta = chain.back().meta;
  Dataset data;
  for (int64_t v = 1; v <= meta.version(); ++v) {
    const std::string& path = paths[v - 1];
    BNN_ASSIGN_OR_RETURN(DatasetFileContents file, ReadDatasetFile(path));
    if (file.meta.dataset_id() != meta.dataset_id() ||
        file.meta.version() != v || file.meta.first_row() != data.num_rows()) {
      return absl::DataLossError(absl::StrCat(
          path, ": holds dataset_id '", file.meta.dataset_id(), "' version ",
          file.meta.version(), " from row ", file.meta.first_row(),
          "; expected dataset_id '", meta.dataset_id(), "' version ", v,
          " from row ", data.num_rows()));
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
  BNN_ASSIGN_OR_RETURN(const std::vector<DatasetVersionRecord> chain,
                       Chain(dataset_id, version));
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> paths, PathsOf(chain));
  const store::DatasetMeta& meta = chain.back().meta;
  return OpenDatasetRows(paths, meta.num_features(), meta.num_rows());
}

std::vector<store::DatasetMeta> DatasetStore::List() const {
  std::vector<store::DatasetMeta> out;
  const bool any_quarantined = !blobs_->Quarantined().empty();
  const absl::Status status = metadata_->Read([&](MetadataReader& r) {
    PageRequest page;
    page.page_size = kMaxPageSize;
    do {
      BNN_ASSIGN_OR_RETURN(Page<DatasetVersionRecord> records,
                           r.ListDatasets(page));
      for (DatasetVersionRecord& record : records.items) {
        if (any_quarantined) {
          // A dataset whose rows are quarantined is not readable.
          BNN_ASSIGN_OR_RETURN(const std::vector<DatasetVersionRecord> versions,
                               r.ListDatasetVersions(record.meta.dataset_id()));
          if (std::any_of(
                  versions.begin(), versions.end(),
                  [&](const DatasetVersionRecord& v) {
                    return !blobs_->CheckNotQuarantined(v.rows_blob).ok();
                  })) {
            continue;
          }
        }
        out.push_back(std::move(record.meta));
      }
      page.page_token = std::move(records.next_page_token);
    } while (!page.page_token.empty());
    return absl::OkStatus();
  });
  if (!status.ok()) {
    spdlog::error("cannot list datasets: {}", status.ToString());
  }
  std::reverse(out.begin(), out.end());
  return out;
}

int64_t DatasetStore::size() const {
  return metadata_->Read([](MetadataReader& r) { return r.CountDatasets(); })
      .value_or(0);
}

absl::StatusOr<std::string> DatasetStore::Delete(absl::string_view dataset_id,
                                                 bool force) {
  absl::MutexLock append_lock(&append_mu_);
  BNN_ASSIGN_OR_RETURN(const std::string id, ResolveId(dataset_id));
  std::vector<std::string> blobs;
  BNN_RETURN_IF_ERROR(
      metadata_->Write([&](MetadataTransaction& tx) -> absl::Status {
        if (!force) BNN_RETURN_IF_ERROR(CheckDatasetUnused(id, tx));
        // An unreadable record is deleted too (its blob is swept at the
        // next start).
        absl::StatusOr<std::vector<DatasetVersionRecord>> versions =
            tx.ListDatasetVersions(id);
        if (absl::IsNotFound(versions.status())) return UnknownDataset(id);
        if (versions.ok()) {
          for (const DatasetVersionRecord& v : *versions) {
            blobs.push_back(v.rows_blob);
          }
        }
        return tx.DeleteDataset(id);
      }));
  for (const std::string& blob : blobs) {
    BNN_RETURN_IF_ERROR(blobs_->RemoveIfUnreferenced(blob, [&]() {
      return metadata_->Read(
          [&](MetadataReader& r) { return r.IsBlobReferenced(blob); });
    }));
  }
  spdlog::info("dataset {} deleted ({} versions)", id, blobs.size());
  return id;
}

}  // namespace bnn::server
