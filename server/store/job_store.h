// Training job records: each store::JobRecord is a record of the
// MetadataStore (metadata_store.h), and a job's last training checkpoint a
// record file of its own, <checkpoint-dir>/<job_id>.ckpt (written by the job
// execution, job_execution.h). The store is also the queue: a worker
// claims the next job (Claim) and heartbeats while it runs it (Heartbeat).
// State changes are committed at once; per-step progress (step, loss, the loss
// curve) of a running job is kept in memory and committed with its next state
// change or checkpoint, so that training does not fsync per step while GetJob,
// ListJobs and WatchJob see it live.
#ifndef BNN_SERVER_STORE_JOB_STORE_H_
#define BNN_SERVER_STORE_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "server/store/job_filter.h"
#include "server/store/metadata_store.h"
#include "store/store.pb.h"

namespace bnn::server {

// True for SUCCEEDED, FAILED and CANCELLED: the job will not change again.
bool IsFinalJobState(store::JobRecord::State state);

// Whether `status` is JobStore::ClaimJob's refusal of a job that is RUNNING
// under a claimant whose heartbeat is still fresh: the one refusal that
// may turn into a claim by waiting (until that heartbeat is older than the
// takeover time). Every other refusal and error is false.
bool IsClaimedByLiveClaimant(const absl::Status& status);

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

  // Opens the jobs of `metadata` (borrowed; it must outlive the store) with
  // their checkpoints in `checkpoint_dir` (created if missing). Jobs left
  // RUNNING by a previous process (a crash) become INTERRUPTED, to be
  // resumed from their checkpoint, and CANCELLING ones CANCELLED, in one
  // transaction; QUEUED and INTERRUPTED ones stay as they are (see
  // Queued(), Interrupted()). Checkpoints of jobs that are finished or
  // unknown are deleted.
  //
  // `runner` is this server's id when other servers share the metadata
  // store (empty otherwise): jobs it claims record it (JobRecord::runner),
  // and only jobs that record it are recovered here (a previous process of
  // this server, which held the same data directory's lock, is gone); the
  // others run on their own server, or are taken over by a Claim once
  // their heartbeat is stale. Every job is listed, read and updated alike.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(
      MetadataStore* metadata, std::string checkpoint_dir,
      std::string runner = "");

  // Where the job's checkpoint is kept: <checkpoint-dir>/<job_id>.ckpt.
  std::string CheckpointPath(absl::string_view job_id) const;

  // Stores `record` under a new id as QUEUED, stamped with the creation
  // time (strictly increasing within a process: FIFO), and returns it.
  absl::StatusOr<store::JobRecord> Create(store::JobRecord record);

  // NotFound for an unknown id, DataLoss for an unreadable record.
  absl::StatusOr<store::JobRecord> Get(absl::string_view job_id) const;

  // Atomically applies `mutate` to a copy of the record; if it returns true
  // the copy replaces the record (committed first for kPersist, with
  // whatever `also` changes in the same transaction). Returns the record as
  // it is afterwards. kPersist reads, mutates and commits in one
  // transaction, so a change another process committed meanwhile is not
  // overwritten: `mutate` sees it, and a job running here that another
  // server cancelled is CANCELLING in what `mutate` sees and in the result
  // (its runner stops when it sees that); a job another process claimed
  // meanwhile is seen as that process committed it (its claimant).
  // `mutate` and `also` run under the store's lock and must not call back into
  // the store; `also` runs only for kPersist.
  absl::StatusOr<store::JobRecord> Update(
      absl::string_view job_id,
      absl::FunctionRef<bool(store::JobRecord*)> mutate,
      Durability durability = Durability::kPersist);
  absl::StatusOr<store::JobRecord> Update(
      absl::string_view job_id,
      absl::FunctionRef<bool(store::JobRecord*)> mutate,
      absl::FunctionRef<absl::Status(MetadataTransaction&,
                                     const store::JobRecord&)>
          also);

  // Claims the next job for `claimant` (a process's ReplicaId()) in one
  // write transaction (MetadataTransaction::NextClaimableJob: the oldest job
  // to resume, else the oldest QUEUED one), so that exactly one process
  // runs it: it becomes RUNNING (started now if it never ran) recording
  // `claimant`, this store's runner and a heartbeat of now, and is
  // returned. A job to resume is INTERRUPTED, or RUNNING or CANCELLING with
  // a heartbeat before `stale_before` (its process stopped: taken over); a
  // CANCELLING one of those becomes CANCELLED instead (its checkpoint is
  // deleted) and the next is looked for. nullopt when none is claimable.
  absl::StatusOr<std::optional<store::JobRecord>> Claim(
      absl::string_view claimant, absl::Time stale_before);
  // Whether Claim would find a job, by reads only (no write transaction,
  // no lock): the index lookup of one QUEUED or INTERRUPTED job, else the
  // heartbeats of the RUNNING and CANCELLING ones. For idle workers'
  // polls; a true answer may be stale by the time Claim runs.
  bool HasClaimable(absl::Time stale_before) const;
  // Claims the job `job_id` as Claim does (bnn-train runs one job):
  // FailedPrecondition naming its state, and its claimant when one runs it,
  // unless it is QUEUED, INTERRUPTED, or RUNNING with a heartbeat before
  // `stale_before`; NotFound for an unknown id. A RUNNING job with a
  // later heartbeat is refused with a status IsClaimedByLiveClaimant()
  // recognises.
  absl::StatusOr<store::JobRecord> ClaimJob(absl::string_view job_id,
                                            absl::string_view claimant,
                                            absl::Time stale_before);
  // Records that `claimant` still runs the job: its heartbeat, now, with
  // the job's progress so far, in one transaction, unless another process
  // claimed the job meanwhile. Returns the record as committed: a claimant
  // other than `claimant` means this process lost its claim (nothing was
  // written: it must stop without committing anything of the job),
  // CANCELLING that the job was cancelled (through any server).
  absl::StatusOr<store::JobRecord> Heartbeat(absl::string_view job_id,
                                             absl::string_view claimant);

  // Forgets the uncommitted progress of a job this process no longer runs
  // (it lost its claim): reads see the committed record again.
  void DropLive(absl::string_view job_id);

  // The QUEUED jobs, oldest first (by creation time, then id).
  std::vector<store::JobRecord> Queued() const;
  // The INTERRUPTED jobs, oldest first.
  std::vector<store::JobRecord> Interrupted() const;

  // The jobs `filter` matches, newest first (creation time, then id, both
  // descending), from just after `after` (none: from the newest), at most
  // `limit`; `*more` tells whether further ones match.
  absl::StatusOr<std::vector<store::JobRecord>> ListNewestFirst(
      const JobFilter& filter, const std::optional<JobCursor>& after, int limit,
      bool* more) const;

  // Jobs per state.
  std::map<store::JobRecord::State, int64_t> CountByState() const;

  // Every job `filter` matches, newest first.
  std::vector<store::JobRecord> List(const JobFilter& filter = {}) const;

 private:
  JobStore(MetadataStore* metadata, std::string checkpoint_dir,
           std::string runner)
      : metadata_(metadata),
        checkpoint_dir_(std::move(checkpoint_dir)),
        runner_(std::move(runner)) {}
  // Whether `job` was claimed by this server (or a previous process of
  // it): every job, for a store of one server.
  bool Runs(const store::JobRecord& job) const {
    return runner_.empty() || job.runner() == runner_;
  }
  // Makes a claimable job RUNNING for `claimant` in `tx`.
  void MarkClaimed(absl::string_view claimant, int64_t now_ms,
                   store::JobRecord* job) const;
  absl::StatusOr<store::JobRecord> UpdateLocked(
      absl::string_view job_id,
      absl::FunctionRef<bool(store::JobRecord*)> mutate, Durability durability,
      absl::FunctionRef<absl::Status(MetadataTransaction&,
                                     const store::JobRecord&)>
          also) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The record with its live progress, if it has any.
  store::JobRecord WithLive(store::JobRecord record) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every job in `state`, oldest first.
  std::vector<store::JobRecord> InState(store::JobRecord::State state) const;

  MetadataStore* const metadata_;
  const std::string checkpoint_dir_;
  const std::string runner_;
  mutable absl::Mutex mu_;
  // The records of jobs running in this process with progress not yet
  // committed: each is the committed record plus that progress (state
  // changes are always committed first), so it never disagrees with the
  // store on anything but progress. Dropped once the job stops running.
  absl::flat_hash_map<std::string, store::JobRecord> live_ ABSL_GUARDED_BY(mu_);
  // The creation time of the last job Create stamped.
  int64_t last_created_unix_ms_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_JOB_STORE_H_
