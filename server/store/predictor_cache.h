// Predictors of stored snapshots, kept in memory for reuse: a small LRU cache
// over the SnapshotStore. A Predictor is immutable and keeps its own cache of
// drawn weight samples, so keeping it across requests is what lets repeated
// Predict and Acquire calls on one snapshot skip decoding and sampling.
//
// It lives beside the store (it is an in-memory view of stored snapshots)
// rather than in an API folder, so that every API and the job runner (which
// loads parent snapshots through it) share one cache.
#ifndef BNN_SERVER_STORE_PREDICTOR_CACHE_H_
#define BNN_SERVER_STORE_PREDICTOR_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "bnn/io/snapshot.h"
#include "bnn/predict/predictor.h"

#include "server/store/snapshot_store.h"

namespace bnn::server {

// Thread-safe. One mutex guards the entries; snapshots are read and decoded
// outside it, so a large snapshot does not stall requests for cached ones.
// A hit looks the snapshot up in the store again only if the metadata store
// committed anything since it last did (MetadataStore::Commits), so a
// deleted or quarantined snapshot is never served from the cache.
class PredictorCache {
 public:
  struct Options {
    // Predictors kept in memory, least recently used evicted first. An
    // evicted predictor lives on while a request still holds it.
    int capacity = 8;
    // For every predictor built (max_samples must cover the server's
    // --max-predict-samples). predictor.cache_bytes bounds each predictor's
    // sample cache, so up to `capacity` times as much is held in all.
    PredictorOptions predictor;

    // InvalidArgument naming the field and its bound.
    absl::Status Validate() const;
  };

  // `snapshots` is borrowed and must outlive the cache.
  static absl::StatusOr<std::unique_ptr<PredictorCache>> Create(
      const Options& options, const SnapshotStore* snapshots);

  // The predictor of a snapshot, shared with concurrent callers; keep it
  // only for the duration of a request. NotFound for an unknown (or just
  // deleted) id, DataLoss (naming the file) for a corrupt one.
  absl::StatusOr<std::shared_ptr<const Predictor>> Get(
      absl::string_view snapshot_id);

  // The decoded snapshot (through Get, so it is cached too).
  absl::StatusOr<std::shared_ptr<const Snapshot>> GetSnapshot(
      absl::string_view snapshot_id);

  // A predictor of `snapshot` with the cache's options, named
  // `snapshot_id` (for Adopt; DataLoss naming the snapshot if it is not
  // servable).
  absl::StatusOr<std::shared_ptr<const Predictor>> NewPredictor(
      absl::string_view snapshot_id,
      std::shared_ptr<const Snapshot> snapshot) const;
  // Caches `predictor` (NewPredictor) of a snapshot about to be committed
  // under `snapshot_id` (a job's result, handed over in memory), so that
  // the first Predict after a job finishes does not read and decode what
  // the job just wrote. Its snapshot must be what the store holds: a
  // predictor of DecodeSnapshot of the stored bytes predicts the same, bit
  // for bit (job_runner_test checks every posterior family). It is cached
  // before the commit, so that it is there when anyone learns the id; the
  // first Get() asks the store whether the snapshot exists, so it is never
  // served if the commit does not happen (call Evict() then to free it).
  void Adopt(absl::string_view snapshot_id,
             std::shared_ptr<const Predictor> predictor);

  // Forgets the snapshot's predictor, if cached; call it after deleting the
  // snapshot from the store. Holders of the predictor finish normally.
  void Evict(absl::string_view snapshot_id);

  struct CacheCounts {
    int64_t hits = 0;
    int64_t misses = 0;
  };
  // Sample-cache lookups of the cached predictors since the previous call,
  // for monotonic counters. Lookups made by a predictor after it left the
  // cache are not counted.
  CacheCounts TakeCacheCounts();

  struct Stats {
    // Predictors held, and the bytes their sample caches hold.
    int64_t predictors = 0;
    int64_t sample_bytes = 0;
    // Get() calls that found the predictor cached, and that loaded it
    // (including loads that failed), since creation.
    int64_t hits = 0;
    int64_t misses = 0;
  };
  // For the metrics; takes the lock briefly.
  Stats GetStats();

 private:
  struct Entry {
    std::string snapshot_id;
    std::shared_ptr<const Predictor> predictor;
    uint64_t last_used = 0;
    // The predictor's cache_stats() already added to TakeCacheCounts().
    CacheCounts counted;
    // The metadata store's Commits() when the snapshot was last found in
    // it: while unchanged, a hit needs no lookup. kNeverChecked: not yet.
    uint64_t checked_at_commits = 0;
  };

  static constexpr uint64_t kNeverChecked = ~uint64_t{0};

  PredictorCache(const Options& options, const SnapshotStore* snapshots)
      : options_(options), snapshots_(snapshots) {}
  // Reads, decodes and wraps a snapshot in a Predictor (outside the lock).
  absl::StatusOr<std::shared_ptr<const Predictor>> Load(
      absl::string_view snapshot_id) const;
  void Insert(absl::string_view snapshot_id,
              std::shared_ptr<const Predictor> predictor,
              uint64_t checked_at_commits) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry of `snapshot_id`, or null.
  Entry* Find(absl::string_view snapshot_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the lookups of `entry` not yet counted to `counts`.
  static void CountLookups(Entry* entry, CacheCounts* counts);
  // Removes an entry, keeping its uncounted sample-cache lookups.
  void Remove(std::vector<Entry>::iterator entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const SnapshotStore* const snapshots_;
  absl::Mutex mu_;
  // At most options_.capacity entries; small, so searched linearly.
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
  // Lookups of removed predictors not yet returned by TakeCacheCounts().
  CacheCounts removed_counts_ ABSL_GUARDED_BY(mu_);
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_PREDICTOR_CACHE_H_
