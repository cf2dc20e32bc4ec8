// Posterior snapshots on disk, <dir>/<snapshot_id>.snap in the bnn snapshot
// format (bnn/io/snapshot.h), loaded lazily into a small LRU cache of
// Predictors.
#ifndef BNN_SERVER_STORE_SNAPSHOT_STORE_H_
#define BNN_SERVER_STORE_SNAPSHOT_STORE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "bnn/io/snapshot.h"
#include "bnn/predict/predictor.h"

namespace bnn::server {

// Thread-safe.
class SnapshotStore {
 public:
  struct Options {
    // Predictors kept in memory, least recently used evicted first. An
    // evicted predictor lives on while a request still holds it.
    int cache_capacity = 8;
    // For every predictor built (max_samples must cover the server's
    // --max-predict-samples).
    PredictorOptions predictor;
  };

  // Opens `dir` (created if missing) and indexes the snapshot files in it
  // without reading them.
  static absl::StatusOr<std::unique_ptr<SnapshotStore>> Open(std::string dir,
                                                             Options options);

  // Writes `snapshot` durably under a new id and returns the id.
  absl::StatusOr<std::string> Create(const Snapshot& snapshot);

  // The predictor of a snapshot, shared with concurrent callers; keep it
  // only for the duration of a request. NotFound for an unknown id, DataLoss
  // (naming the file) for a corrupt one.
  absl::StatusOr<std::shared_ptr<const Predictor>> GetPredictor(
      absl::string_view snapshot_id);

  int64_t size() const;

 private:
  struct CacheEntry {
    std::string snapshot_id;
    std::shared_ptr<const Predictor> predictor;
    uint64_t last_used = 0;
  };

  SnapshotStore(std::string dir, Options options)
      : dir_(std::move(dir)), options_(options) {}
  std::string PathOf(absl::string_view snapshot_id) const;
  void InsertIntoCache(absl::string_view snapshot_id,
                       std::shared_ptr<const Predictor> predictor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const Options options_;
  mutable absl::Mutex mu_;
  std::set<std::string, std::less<>> ids_ ABSL_GUARDED_BY(mu_);
  // At most options_.cache_capacity entries; small, so searched linearly.
  std::vector<CacheEntry> cache_ ABSL_GUARDED_BY(mu_);
  uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_SNAPSHOT_STORE_H_
