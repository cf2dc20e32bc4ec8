#include "server/store/snapshot_store.h"

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>

#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/record_file.h"

namespace bnn::server {
namespace {

constexpr absl::string_view kExtension = ".snap";

// An indexed snapshot that cannot be served is lost data, unless it was
// written by a newer server (FailedPrecondition).
absl::Status LoadError(absl::string_view snapshot_id,
                       const absl::Status& status) {
  return absl::Status(absl::IsFailedPrecondition(status)
                          ? absl::StatusCode::kFailedPrecondition
                          : absl::StatusCode::kDataLoss,
                      absl::StrCat("snapshot_id '", snapshot_id,
                                   "' cannot be loaded: ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SnapshotStore>> SnapshotStore::Open(
    std::string dir, Options options) {
  if (options.cache_capacity < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot cache_capacity ", options.cache_capacity, " must be >= 1"));
  }
  BNN_RETURN_IF_ERROR(options.predictor.Validate());
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> ids,
                       ScanRecordDir(dir, kSnapshotIdPrefix, kExtension));
  std::unique_ptr<SnapshotStore> store(
      new SnapshotStore(std::move(dir), options));
  absl::MutexLock lock(&store->mu_);
  store->ids_.insert(ids.begin(), ids.end());
  return store;
}

std::string SnapshotStore::PathOf(absl::string_view snapshot_id) const {
  return absl::StrCat(dir_, "/", snapshot_id, kExtension);
}

absl::StatusOr<std::string> SnapshotStore::Create(const Snapshot& snapshot) {
  std::string id;
  {
    absl::MutexLock lock(&mu_);
    do {
      id = NewId(kSnapshotIdPrefix);
    } while (ids_.count(id) > 0);
  }
  // bnn::WriteSnapshotFile does not fsync; the store's writer does.
  BNN_ASSIGN_OR_RETURN(const std::string bytes, EncodeSnapshot(snapshot));
  BNN_RETURN_IF_ERROR(WriteFileAtomically(PathOf(id), bytes));
  absl::MutexLock lock(&mu_);
  ids_.insert(id);
  return id;
}

absl::StatusOr<std::shared_ptr<const Predictor>> SnapshotStore::GetPredictor(
    absl::string_view snapshot_id) {
  {
    absl::MutexLock lock(&mu_);
    if (ids_.count(snapshot_id) == 0) {
      return absl::NotFoundError(
          absl::StrCat("snapshot_id '", snapshot_id, "' not found"));
    }
    for (CacheEntry& entry : cache_) {
      if (entry.snapshot_id == snapshot_id) {
        entry.last_used = ++use_clock_;
        return entry.predictor;
      }
    }
  }
  // Loaded outside the lock so that a large snapshot does not stall
  // requests for cached ones.
  absl::StatusOr<Snapshot> snapshot = ReadSnapshotFile(PathOf(snapshot_id));
  if (!snapshot.ok()) return LoadError(snapshot_id, snapshot.status());
  absl::StatusOr<std::unique_ptr<Predictor>> created =
      Predictor::Create(std::make_shared<const Snapshot>(*std::move(snapshot)),
                        options_.predictor);
  if (!created.ok()) return LoadError(snapshot_id, created.status());
  std::shared_ptr<const Predictor> predictor = *std::move(created);
  absl::MutexLock lock(&mu_);
  InsertIntoCache(snapshot_id, predictor);
  return predictor;
}

void SnapshotStore::InsertIntoCache(
    absl::string_view snapshot_id, std::shared_ptr<const Predictor> predictor) {
  // A concurrent miss may have loaded the same snapshot; keep one entry.
  for (CacheEntry& entry : cache_) {
    if (entry.snapshot_id == snapshot_id) {
      entry.last_used = ++use_clock_;
      return;
    }
  }
  if (cache_.size() >= static_cast<size_t>(options_.cache_capacity)) {
    const auto oldest = std::min_element(
        cache_.begin(), cache_.end(),
        [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
    cache_.erase(oldest);
  }
  cache_.push_back(
      {std::string(snapshot_id), std::move(predictor), ++use_clock_});
}

int64_t SnapshotStore::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(ids_.size());
}

}  // namespace bnn::server
