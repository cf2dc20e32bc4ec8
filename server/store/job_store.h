// Training job records on disk, <dir>/<job_id>.job holding a store::JobRecord
// in a checksummed frame. Every record is also held in memory; state changes
// are written through, per-step progress is kept in memory only.
#ifndef BNN_SERVER_STORE_JOB_STORE_H_
#define BNN_SERVER_STORE_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "store/store.pb.h"

namespace bnn::server {

// The error of jobs found RUNNING when the store opens (their process is
// gone) or still running when the server's shutdown grace ended.
inline constexpr absl::string_view kRestartedJobError =
    "server restarted while the job was running";

// Thread-safe.
class JobStore {
 public:
  enum class Durability { kPersist, kMemoryOnly };

  // Opens `dir` (created if missing) and loads every record. Jobs left
  // RUNNING by a previous process become FAILED with kRestartedJobError;
  // QUEUED ones stay queued (see Queued()). An unreadable file stays indexed
  // with its error (DataLoss on lookup) and is logged.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(std::string dir);

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
  absl::Status Write(const store::JobRecord& record) const;
  absl::StatusOr<store::JobRecord> Read(const std::string& job_id) const;

  const std::string dir_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_JOB_STORE_H_
