// Posterior snapshots on disk: <dir>/<snapshot_id>.snap in the bnn snapshot
// format (bnn/io/snapshot.h), and beside it <snapshot_id>.info, a small
// store::SnapshotMeta record so that listing and lookups never decode a
// snapshot. Snapshots are loaded lazily into a small LRU cache of
// Predictors, whose sample caches therefore outlive single requests.
#ifndef BNN_SERVER_STORE_SNAPSHOT_STORE_H_
#define BNN_SERVER_STORE_SNAPSHOT_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "bnn/io/snapshot.h"
#include "bnn/predict/predictor.h"

#include "server/store/record_file.h"
#include "store/store.pb.h"

namespace bnn::server {

// Thread-safe.
class SnapshotStore {
 public:
  struct Options {
    // Predictors kept in memory, least recently used evicted first. An
    // evicted predictor lives on while a request still holds it.
    int cache_capacity = 8;
    // For every predictor built (max_samples must cover the server's
    // --max-predict-samples). predictor.cache_bytes bounds each predictor's
    // sample cache, so up to cache_capacity times as much is held in all.
    PredictorOptions predictor;
  };

  // Opens `dir` (created if missing) and indexes the snapshots in it from
  // their .info records. A snapshot without a valid record (written by an
  // older server, or interrupted by a crash) is decoded once and its record
  // rewritten; one that cannot be decoded stays indexed with its error
  // (DataLoss on lookup) and is logged. Records without a snapshot are
  // deleted.
  static absl::StatusOr<std::unique_ptr<SnapshotStore>> Open(std::string dir,
                                                             Options options);

  // Writes `snapshot` durably under a new id and returns its metadata.
  absl::StatusOr<store::SnapshotMeta> Create(const Snapshot& snapshot);

  // Stores the snapshot file `bytes` (e.g. from another server's export)
  // unchanged under a new id, after decoding it completely. The errors of
  // bnn::DecodeSnapshot (DataLoss for truncated or corrupt bytes,
  // FailedPrecondition for a newer format, InvalidArgument for bad
  // contents) are returned as they are, and nothing is stored.
  absl::StatusOr<store::SnapshotMeta> Import(const std::string& bytes);

  // NotFound for an unknown id, DataLoss (naming the file) for a corrupt
  // snapshot.
  absl::StatusOr<store::SnapshotMeta> GetMeta(
      absl::string_view snapshot_id) const;

  // Every readable snapshot, oldest first (ties by id).
  std::vector<store::SnapshotMeta> List() const;

  // The predictor of a snapshot, shared with concurrent callers; keep it
  // only for the duration of a request. NotFound for an unknown (or just
  // deleted) id, DataLoss (naming the file) for a corrupt one.
  absl::StatusOr<std::shared_ptr<const Predictor>> GetPredictor(
      absl::string_view snapshot_id);

  // The decoded snapshot (through GetPredictor, so it is cached too).
  absl::StatusOr<std::shared_ptr<const Snapshot>> GetSnapshot(
      absl::string_view snapshot_id);

  // The snapshot's file exactly as stored, mapped into memory. The mapping
  // stays readable if the snapshot is deleted meanwhile.
  absl::StatusOr<MappedFile> OpenFile(absl::string_view snapshot_id) const;

  // Deletes the snapshot's files and evicts its predictor. Requests that
  // already hold the predictor (or the decoded snapshot) finish normally;
  // later lookups are NotFound. Corrupt snapshots can be deleted too.
  absl::Status Delete(absl::string_view snapshot_id);

  struct CacheCounts {
    int64_t hits = 0;
    int64_t misses = 0;
  };
  // Sample-cache lookups of the cached predictors since the previous call,
  // for monotonic counters. Lookups made by a predictor after it left the
  // cache are not counted.
  CacheCounts TakeCacheCounts();

  // Number of readable snapshots.
  int64_t size() const;

 private:
  struct Entry {
    absl::Status status;  // why the snapshot is unreadable, or OK
    store::SnapshotMeta meta;
  };
  struct CacheEntry {
    std::string snapshot_id;
    std::shared_ptr<const Predictor> predictor;
    uint64_t last_used = 0;
    // The predictor's cache_stats() already added to TakeCacheCounts().
    CacheCounts counted;
  };

  SnapshotStore(std::string dir, Options options)
      : dir_(std::move(dir)), options_(options) {}
  std::string PathOf(absl::string_view snapshot_id) const;
  std::string InfoPathOf(absl::string_view snapshot_id) const;
  // Indexes one snapshot file when the store opens.
  Entry Index(const std::string& snapshot_id, bool has_info) const;
  // Writes `bytes`, which decode to `snapshot`, and its record under a new
  // id.
  absl::StatusOr<store::SnapshotMeta> Store(absl::string_view bytes,
                                            const Snapshot& snapshot);
  // Reads, decodes and wraps a snapshot in a Predictor (outside the lock).
  absl::StatusOr<std::shared_ptr<const Predictor>> LoadPredictor(
      absl::string_view snapshot_id) const;
  void InsertIntoCache(absl::string_view snapshot_id,
                       std::shared_ptr<const Predictor> predictor)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the lookups of `entry` not yet counted to `counts`.
  static void CountLookups(CacheEntry* entry, CacheCounts* counts);
  // Removes a cache entry, keeping its uncounted cache lookups.
  void Evict(std::vector<CacheEntry>::iterator entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  const Options options_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
  // At most options_.cache_capacity entries; small, so searched linearly.
  std::vector<CacheEntry> cache_ ABSL_GUARDED_BY(mu_);
  uint64_t use_clock_ ABSL_GUARDED_BY(mu_) = 0;
  // Lookups of evicted predictors not yet returned by TakeCacheCounts().
  CacheCounts evicted_counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_SNAPSHOT_STORE_H_
