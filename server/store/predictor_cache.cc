#include "server/store/predictor_cache.h"

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>

#include "bnn/status.h"

namespace bnn::server {

absl::Status PredictorCache::Options::Validate() const {
  if (capacity < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("predictor cache capacity ", capacity, " must be >= 1"));
  }
  return predictor.Validate();
}

absl::StatusOr<std::unique_ptr<PredictorCache>> PredictorCache::Create(
    const Options& options, const SnapshotStore* snapshots) {
  BNN_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<PredictorCache>(
      new PredictorCache(options, snapshots));
}

absl::StatusOr<std::shared_ptr<const Predictor>> PredictorCache::Get(
    absl::string_view snapshot_id) {
  // Read before any lookup: see MetadataStore::Commits.
  const uint64_t commits = snapshots_->metadata().Commits();
  {
    absl::MutexLock lock(&mu_);
    Entry* entry = Find(snapshot_id);
    if (entry != nullptr && entry->checked_at_commits == commits) {
      entry->last_used = ++use_clock_;
      ++hits_;
      return entry->predictor;
    }
  }
  // The store changed since the snapshot was last seen in it: is it still
  // there (and servable)?
  BNN_RETURN_IF_ERROR(snapshots_->GetMeta(snapshot_id).status());
  {
    absl::MutexLock lock(&mu_);
    if (Entry* entry = Find(snapshot_id); entry != nullptr) {
      entry->checked_at_commits = commits;
      entry->last_used = ++use_clock_;
      ++hits_;
      return entry->predictor;
    }
    ++misses_;
  }
  absl::StatusOr<std::shared_ptr<const Predictor>> predictor =
      Load(snapshot_id);
  absl::MutexLock lock(&mu_);
  // Deleted while loading (its file may have vanished under the reader):
  // NotFound rather than the read error, and nothing cached. The store is
  // asked under mu_, so an Evict() that follows the deletion comes after
  // the Insert() below.
  BNN_RETURN_IF_ERROR(snapshots_->GetMeta(snapshot_id).status());
  if (!predictor.ok()) return predictor.status();
  Insert(snapshot_id, *predictor, commits);
  return predictor;
}

absl::StatusOr<std::shared_ptr<const Predictor>> PredictorCache::NewPredictor(
    absl::string_view snapshot_id,
    std::shared_ptr<const Snapshot> snapshot) const {
  absl::StatusOr<std::unique_ptr<Predictor>> created = Predictor::Create(
      std::move(snapshot), options_.predictor, std::string(snapshot_id));
  if (!created.ok()) return SnapshotLoadError(snapshot_id, created.status());
  return std::shared_ptr<const Predictor>(*std::move(created));
}

void PredictorCache::Adopt(absl::string_view snapshot_id,
                           std::shared_ptr<const Predictor> predictor) {
  absl::MutexLock lock(&mu_);
  // Never checked: Get() looks the snapshot up in the store first.
  Insert(snapshot_id, std::move(predictor), kNeverChecked);
}

absl::StatusOr<std::shared_ptr<const Predictor>> PredictorCache::Load(
    absl::string_view snapshot_id) const {
  BNN_ASSIGN_OR_RETURN(Snapshot snapshot, snapshots_->Read(snapshot_id));
  return NewPredictor(snapshot_id,
                      std::make_shared<const Snapshot>(std::move(snapshot)));
}

absl::StatusOr<std::shared_ptr<const Snapshot>> PredictorCache::GetSnapshot(
    absl::string_view snapshot_id) {
  BNN_ASSIGN_OR_RETURN(const std::shared_ptr<const Predictor> predictor,
                       Get(snapshot_id));
  return predictor->shared_snapshot();
}

PredictorCache::Stats PredictorCache::GetStats() {
  Stats stats;
  absl::MutexLock lock(&mu_);
  stats.predictors = static_cast<int64_t>(entries_.size());
  for (const Entry& entry : entries_) {
    stats.sample_bytes += entry.predictor->cache_stats().bytes;
  }
  stats.hits = hits_;
  stats.misses = misses_;
  return stats;
}

void PredictorCache::Evict(absl::string_view snapshot_id) {
  absl::MutexLock lock(&mu_);
  const auto it = std::find_if(
      entries_.begin(), entries_.end(),
      [&](const Entry& e) { return e.snapshot_id == snapshot_id; });
  if (it != entries_.end()) Remove(it);
}

PredictorCache::Entry* PredictorCache::Find(absl::string_view snapshot_id) {
  for (Entry& entry : entries_) {
    if (entry.snapshot_id == snapshot_id) return &entry;
  }
  return nullptr;
}

void PredictorCache::Insert(absl::string_view snapshot_id,
                            std::shared_ptr<const Predictor> predictor,
                            uint64_t checked_at_commits) {
  // A concurrent miss may have loaded the same snapshot; keep one entry.
  if (Entry* entry = Find(snapshot_id); entry != nullptr) {
    entry->last_used = ++use_clock_;
    return;
  }
  if (entries_.size() >= static_cast<size_t>(options_.capacity)) {
    Remove(std::min_element(entries_.begin(), entries_.end(),
                            [](const Entry& a, const Entry& b) {
                              return a.last_used < b.last_used;
                            }));
  }
  entries_.push_back({std::string(snapshot_id),
                      std::move(predictor),
                      ++use_clock_,
                      {},
                      checked_at_commits});
}

void PredictorCache::CountLookups(Entry* entry, CacheCounts* counts) {
  const Predictor::CacheStats stats = entry->predictor->cache_stats();
  counts->hits += stats.hits - entry->counted.hits;
  counts->misses += stats.misses - entry->counted.misses;
  entry->counted = {stats.hits, stats.misses};
}

void PredictorCache::Remove(std::vector<Entry>::iterator entry) {
  CountLookups(&*entry, &removed_counts_);
  entries_.erase(entry);
}

PredictorCache::CacheCounts PredictorCache::TakeCacheCounts() {
  absl::MutexLock lock(&mu_);
  CacheCounts counts = std::exchange(removed_counts_, {});
  for (Entry& entry : entries_) CountLookups(&entry, &counts);
  return counts;
}

}  // namespace bnn::server
