// Training job records on disk, <dir>/<job_id>.job holding a store::JobRecord
// in a checksummed frame, and the job's last training checkpoint beside it,
// <dir>/<job_id>.ckpt (written by the job runner). Every record is also held
// in memory; state changes are written through, per-step progress is kept in
// memory only.
#ifndef BNN_SERVER_STORE_JOB_STORE_H_
#define BNN_SERVER_STORE_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "server/store/job_filter.h"
#include "store/store.pb.h"

namespace bnn::server {

// The error of jobs that a server older than checkpoints found RUNNING
// when it opened the store; such jobs may still adopt their snapshot
// (JobRunner).
inline constexpr absl::string_view kRestartedJobError =
    "server restarted while the job was running";

// True for SUCCEEDED, FAILED and CANCELLED: the job will not change again.
bool IsFinalJobState(store::JobRecord::State state);

// A position in the newest-first order of jobs (creation time, then id,
// both descending): the last job of a page.
struct JobCursor {
  int64_t created_unix_ms = 0;
  std::string job_id;
};

// Thread-safe.
class JobStore {
 public:
  enum class Durability { kPersist, kMemoryOnly };

  // Opens `dir` (created if missing) and loads every record. Jobs left
  // RUNNING by a previous process (a crash) become INTERRUPTED, to be
  // resumed from their checkpoint, and CANCELLING ones CANCELLED; QUEUED and
  // INTERRUPTED ones stay as they are (see Queued(), Interrupted()).
  // Checkpoints of jobs that are finished or unknown are deleted. An
  // unreadable file stays indexed with its error (DataLoss on lookup) and is
  // logged.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(std::string dir);

  // Where the job's checkpoint is kept: <dir>/<job_id>.ckpt.
  std::string CheckpointPath(absl::string_view job_id) const;

  // Stores `record` under a new id as QUEUED, stamped with the creation
  // time, and returns it.
  absl::StatusOr<store::JobRecord> Create(store::JobRecord record);

  // NotFound for an unknown id.
  absl::StatusOr<store::JobRecord> Get(absl::string_view job_id) const;

  // Atomically applies `mutate` to a copy of the record; if it returns true
  // the copy replaces the record (written to disk first for kPersist). Returns
  // the record as it is afterwards. `mutate` runs under the store's lock and
  // must not call back into the store.
  absl::StatusOr<store::JobRecord> Update(
      absl::string_view job_id,
      absl::FunctionRef<bool(store::JobRecord*)> mutate,
      Durability durability = Durability::kPersist);

  // The QUEUED jobs, oldest first (by creation time, then id).
  std::vector<store::JobRecord> Queued() const;
  // The INTERRUPTED jobs, oldest first.
  std::vector<store::JobRecord> Interrupted() const;

  // The readable jobs `filter` matches, newest first (creation time, then
  // id, both descending), from just after `after` (none: from the newest),
  // at most `limit`; `*more` tells whether further ones match.
  std::vector<store::JobRecord> ListNewestFirst(
      const JobFilter& filter, const std::optional<JobCursor>& after, int limit,
      bool* more) const;

  // Readable jobs per state.
  std::map<store::JobRecord::State, int64_t> CountByState() const;

  // Every readable record, by id.
  std::vector<store::JobRecord> List() const;

 private:
  struct Entry {
    absl::Status status;  // why the file is unreadable, or OK
    store::JobRecord record;
  };

  explicit JobStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(absl::string_view job_id) const;
  // Readable jobs in `state`, oldest first.
  std::vector<store::JobRecord> InState(store::JobRecord::State state) const;
  absl::Status Write(const store::JobRecord& record) const;
  absl::StatusOr<store::JobRecord> Read(const std::string& job_id) const;

  const std::string dir_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_JOB_STORE_H_
