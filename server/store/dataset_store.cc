#include "server/store/dataset_store.h"

#include <algorithm>
#include <climits>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "server/store/ids.h"
#include "server/store/record_file.h"

namespace bnn::server {
namespace {

constexpr RecordFormat kDatasetFormat{"BNNDSET1", 1};
constexpr absl::string_view kExtension = ".dataset";

store::DatasetFile DatasetToFile(const Dataset& data, store::DatasetMeta meta) {
  store::DatasetFile file;
  *file.mutable_meta() = std::move(meta);
  file.mutable_features()->Add(data.features.begin(), data.features.end());
  file.mutable_targets()->Add(data.targets.begin(), data.targets.end());
  return file;
}

absl::StatusOr<Dataset> DatasetFromFile(const store::DatasetFile& file) {
  const store::DatasetMeta& meta = file.meta();
  Dataset data;
  BNN_ASSIGN_OR_RETURN(data.task, StringToTask(meta.task()));
  data.num_features = meta.num_features();
  data.features.assign(file.features().begin(), file.features().end());
  data.targets.assign(file.targets().begin(), file.targets().end());
  data.num_classes = meta.num_classes();
  data.class_values.assign(meta.class_values().begin(),
                           meta.class_values().end());
  data.feature_names.assign(meta.feature_names().begin(),
                            meta.feature_names().end());
  data.target_name = meta.target_name();
  if (data.num_rows() != meta.num_rows()) {
    return absl::DataLossError(absl::StrCat("the file holds ", data.num_rows(),
                                            " rows; its metadata says ",
                                            meta.num_rows()));
  }
  BNN_RETURN_IF_ERROR(data.Validate());
  return data;
}

using MetaAndRows = std::pair<store::DatasetMeta, Dataset>;

absl::StatusOr<MetaAndRows> ParseDatasetFile(absl::string_view bytes) {
  BNN_ASSIGN_OR_RETURN(const absl::string_view payload,
                       DecodeRecord(kDatasetFormat, bytes));
  store::DatasetFile file;
  if (!file.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    return absl::DataLossError("unparseable dataset payload");
  }
  BNN_ASSIGN_OR_RETURN(Dataset data, DatasetFromFile(file));
  return MetaAndRows(std::move(*file.mutable_meta()), std::move(data));
}

// Reads and verifies one dataset file. Errors name the file; bad contents
// are DataLoss (the store wrote them valid), a newer format
// FailedPrecondition.
absl::StatusOr<MetaAndRows> ReadDatasetFile(const std::string& path) {
  BNN_ASSIGN_OR_RETURN(const std::string bytes, ReadFile(path));
  absl::StatusOr<MetaAndRows> parsed = ParseDatasetFile(bytes);
  if (!parsed.ok()) {
    const absl::StatusCode code = absl::IsFailedPrecondition(parsed.status())
                                      ? absl::StatusCode::kFailedPrecondition
                                      : absl::StatusCode::kDataLoss;
    return absl::Status(code,
                        absl::StrCat(path, ": ", parsed.status().message()));
  }
  return parsed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatasetStore>> DatasetStore::Open(
    std::string dir) {
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> ids,
                       ScanRecordDir(dir, kDatasetIdPrefix, kExtension));
  std::unique_ptr<DatasetStore> store(new DatasetStore(std::move(dir)));
  absl::MutexLock lock(&store->mu_);
  for (const std::string& id : ids) {
    Entry& entry = store->entries_[id];
    absl::StatusOr<MetaAndRows> read = ReadDatasetFile(store->PathOf(id));
    if (read.ok() && read->first.dataset_id() != id) {
      read = absl::DataLossError(absl::StrCat(store->PathOf(id),
                                              ": holds dataset_id '",
                                              read->first.dataset_id(), "'"));
    }
    if (!read.ok()) {
      spdlog::error("dataset {} is unreadable: {}", id,
                    read.status().ToString());
      entry.status = read.status();
      entry.meta.set_dataset_id(id);
      continue;
    }
    entry.meta = std::move(read->first);
  }
  return store;
}

std::string DatasetStore::PathOf(absl::string_view dataset_id) const {
  return absl::StrCat(dir_, "/", dataset_id, kExtension);
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Create(
    const Dataset& data, absl::string_view name) {
  store::DatasetMeta meta;
  {
    absl::MutexLock lock(&mu_);
    do {
      meta.set_dataset_id(NewId(kDatasetIdPrefix));
    } while (entries_.count(meta.dataset_id()) > 0);
  }
  meta.set_version(1);
  meta.set_name(std::string(name));
  meta.set_task(std::string(TaskToString(data.task)));
  meta.set_num_rows(data.num_rows());
  meta.set_num_features(static_cast<int32_t>(data.num_features));
  meta.set_num_classes(data.num_classes);
  meta.mutable_class_values()->Add(data.class_values.begin(),
                                   data.class_values.end());
  for (const std::string& feature : data.feature_names) {
    meta.add_feature_names(feature);
  }
  meta.set_target_name(data.target_name);
  meta.set_hash(DatasetHash(data));
  meta.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));

  std::string payload;
  {
    const store::DatasetFile file = DatasetToFile(data, meta);
    // Protobuf cannot serialise messages of 2 GiB or more.
    if (file.ByteSizeLong() >= static_cast<size_t>(INT_MAX)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("dataset of ", file.ByteSizeLong(),
                       " bytes exceeds the 2 GiB storage limit"));
    }
    payload = file.SerializeAsString();
  }
  // Written outside the lock: large files must not stall lookups.
  BNN_RETURN_IF_ERROR(WriteFileAtomically(
      PathOf(meta.dataset_id()), EncodeRecord(kDatasetFormat, payload)));
  absl::MutexLock lock(&mu_);
  entries_[meta.dataset_id()] = Entry{absl::OkStatus(), meta};
  return meta;
}

absl::StatusOr<store::DatasetMeta> DatasetStore::Get(
    absl::string_view dataset_id) const {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(dataset_id);
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat("dataset_id '", dataset_id, "' not found"));
  }
  if (!it->second.status.ok()) return it->second.status;
  return it->second.meta;
}

absl::StatusOr<Dataset> DatasetStore::Load(absl::string_view dataset_id) const {
  BNN_RETURN_IF_ERROR(Get(dataset_id).status());
  BNN_ASSIGN_OR_RETURN(auto read, ReadDatasetFile(PathOf(dataset_id)));
  return std::move(read.second);
}

std::vector<store::DatasetMeta> DatasetStore::List() const {
  std::vector<store::DatasetMeta> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : entries_) {
      if (entry.status.ok()) out.push_back(entry.meta);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.created_unix_ms() < b.created_unix_ms();
  });
  return out;
}

int64_t DatasetStore::size() const {
  absl::MutexLock lock(&mu_);
  return std::count_if(entries_.begin(), entries_.end(),
                       [](const auto& kv) { return kv.second.status.ok(); });
}

}  // namespace bnn::server
