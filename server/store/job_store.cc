#include "server/store/job_store.h"

#include <algorithm>
#include <utility>

#include <absl/strings/cord.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/io/file.h"
#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/record_dir.h"

namespace bnn::server {
namespace {

constexpr absl::string_view kCheckpointExtension = ".ckpt";
// The page token list name of ListNewestFirst's cursors.
constexpr absl::string_view kJobsList = "jobs";

// The payload that marks ClaimJob's refusal of a job a live claimant runs
// (IsClaimedByLiveClaimant); its value is the claimant.
constexpr absl::string_view kLiveClaimantPayload =
    "type.googleapis.com/bnn.server.store.ClaimedByLiveClaimant";

absl::Status UnknownJob(absl::string_view job_id) {
  return absl::NotFoundError(absl::StrCat("job_id '", job_id, "' not found"));
}

// Whether the job runs in this process: only such jobs have live progress.
bool IsActive(store::JobRecord::State state) {
  return state == store::JobRecord::RUNNING ||
         state == store::JobRecord::CANCELLING;
}

}  // namespace

bool IsClaimedByLiveClaimant(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         status.GetPayload(kLiveClaimantPayload).has_value();
}

bool IsFinalJobState(store::JobRecord::State state) {
  return state == store::JobRecord::SUCCEEDED ||
         state == store::JobRecord::FAILED ||
         state == store::JobRecord::CANCELLED;
}

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(
    MetadataStore* metadata, std::string checkpoint_dir, std::string runner) {
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> checkpoints,
                       ScanRecordStems(checkpoint_dir, kCheckpointExtension));
  std::unique_ptr<JobStore> store(
      new JobStore(metadata, std::move(checkpoint_dir), std::move(runner)));
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  // Their process is gone: running jobs resume from their last checkpoint,
  // cancelling ones are cancelled.
  JobFilter stopped;
  stopped.states = {store::JobRecord::RUNNING, store::JobRecord::CANCELLING};
  const std::vector<store::JobRecord> jobs = store->List(stopped);
  BNN_RETURN_IF_ERROR(metadata->Write([&](MetadataTransaction& tx) {
    for (const store::JobRecord& listed : jobs) {
      // Read again in this transaction: another server may have taken
      // the job over since it was listed.
      BNN_ASSIGN_OR_RETURN(store::JobRecord job, tx.GetJob(listed.job_id()));
      // Another server's job runs there.
      if (!store->Runs(job) || !IsActive(job.state())) continue;
      job.set_heartbeat_unix_ms(0);
      if (job.state() == store::JobRecord::RUNNING) {
        job.set_state(store::JobRecord::INTERRUPTED);
        spdlog::warn(
            "job {} was running when its server stopped; marked INTERRUPTED",
            job.job_id());
      } else {
        job.set_state(store::JobRecord::CANCELLED);
        job.set_finished_unix_ms(now_ms);
        spdlog::warn(
            "job {} was being cancelled when its server stopped; marked "
            "CANCELLED",
            job.job_id());
      }
      BNN_RETURN_IF_ERROR(tx.UpdateJob(job));
    }
    return absl::OkStatus();
  }));
  // Checkpoints are kept only for jobs that may still resume.
  for (const std::string& id : checkpoints) {
    const absl::StatusOr<store::JobRecord> job = store->Get(id);
    if (!absl::IsNotFound(job.status()) &&
        (!job.ok() || !IsFinalJobState(job->state()))) {
      continue;
    }
    spdlog::info("deleting the checkpoint of finished or unknown job {}", id);
    BNN_RETURN_IF_ERROR(RemoveFile(store->CheckpointPath(id)));
  }
  return store;
}

std::string JobStore::CheckpointPath(absl::string_view job_id) const {
  return absl::StrCat(checkpoint_dir_, "/", job_id, kCheckpointExtension);
}

absl::StatusOr<store::JobRecord> JobStore::Create(store::JobRecord record) {
  record.set_state(store::JobRecord::QUEUED);
  {
    // Strictly increasing in this process, so that jobs submitted within
    // one millisecond are claimed in the order they were submitted (the
    // claim orders by creation time, then id).
    absl::MutexLock lock(&mu_);
    last_created_unix_ms_ =
        std::max(absl::ToUnixMillis(absl::Now()), last_created_unix_ms_ + 1);
    record.set_created_unix_ms(last_created_unix_ms_);
  }
  record.set_runner(runner_);
  absl::Status created;
  do {  // ids are random: a collision is retried with another
    record.set_job_id(NewId(kJobIdPrefix));
    created = metadata_->Write(
        [&](MetadataTransaction& tx) { return tx.CreateJob(record); });
  } while (absl::IsAlreadyExists(created));
  BNN_RETURN_IF_ERROR(created);
  return record;
}

store::JobRecord JobStore::WithLive(store::JobRecord record) const {
  const auto it = live_.find(record.job_id());
  return it == live_.end() ? std::move(record) : it->second;
}

absl::StatusOr<store::JobRecord> JobStore::Get(absl::string_view job_id) const {
  absl::MutexLock lock(&mu_);
  if (const auto it = live_.find(job_id); it != live_.end()) {
    return it->second;
  }
  absl::StatusOr<store::JobRecord> record =
      metadata_->Read([&](MetadataReader& r) { return r.GetJob(job_id); });
  if (absl::IsNotFound(record.status())) return UnknownJob(job_id);
  return record;
}

absl::StatusOr<store::JobRecord> JobStore::Update(
    absl::string_view job_id, absl::FunctionRef<bool(store::JobRecord*)> mutate,
    Durability durability) {
  absl::MutexLock lock(&mu_);
  return UpdateLocked(job_id, mutate, durability,
                      [](MetadataTransaction&, const store::JobRecord&) {
                        return absl::OkStatus();
                      });
}

absl::StatusOr<store::JobRecord> JobStore::Update(
    absl::string_view job_id, absl::FunctionRef<bool(store::JobRecord*)> mutate,
    absl::FunctionRef<absl::Status(MetadataTransaction&,
                                   const store::JobRecord&)>
        also) {
  absl::MutexLock lock(&mu_);
  return UpdateLocked(job_id, mutate, Durability::kPersist, also);
}

absl::StatusOr<store::JobRecord> JobStore::UpdateLocked(
    absl::string_view job_id, absl::FunctionRef<bool(store::JobRecord*)> mutate,
    Durability durability,
    absl::FunctionRef<absl::Status(MetadataTransaction&,
                                   const store::JobRecord&)>
        also) {
  const auto live = live_.find(job_id);
  if (durability == Durability::kPersist) {
    // Other processes change jobs too (a cancel, a takeover): read, change
    // and commit in one transaction, over what they committed.
    store::JobRecord result;
    bool changed = false;
    // Whether this process runs the job (its live progress is the job's).
    bool ours = false;
    const absl::Status written =
        metadata_->Write([&](MetadataTransaction& tx) -> absl::Status {
          absl::StatusOr<store::JobRecord> committed = tx.GetJob(job_id);
          if (absl::IsNotFound(committed.status())) return UnknownJob(job_id);
          BNN_RETURN_IF_ERROR(committed.status());
          store::JobRecord current = *std::move(committed);
          ours = live != live_.end() &&
                 live->second.claimant() == current.claimant();
          if (ours) {
            // The progress of this process, the state of the store if
            // another server cancelled the job. (If another process took
            // the job over, what it committed is the record.)
            const store::JobRecord::State state = current.state();
            current = live->second;
            if (state == store::JobRecord::CANCELLING &&
                current.state() == store::JobRecord::RUNNING) {
              current.set_state(store::JobRecord::CANCELLING);
            }
          }
          result = current;
          if (!mutate(&result)) {
            result = std::move(current);  // declined: as it was
            return absl::OkStatus();
          }
          changed = true;
          BNN_RETURN_IF_ERROR(tx.UpdateJob(result));
          return also(tx, result);
        });
    BNN_RETURN_IF_ERROR(written);
    if (!ours) {
      // Not running here (or no longer: the claim was lost).
      if (live != live_.end()) live_.erase(live);
    } else if (changed) {
      if (IsActive(result.state())) {
        live_[result.job_id()] = result;
      } else {
        live_.erase(result.job_id());
      }
    }
    return result;
  }
  store::JobRecord current;
  if (live != live_.end()) {
    current = live->second;
  } else {
    absl::StatusOr<store::JobRecord> stored =
        metadata_->Read([&](MetadataReader& r) { return r.GetJob(job_id); });
    if (absl::IsNotFound(stored.status())) return UnknownJob(job_id);
    BNN_RETURN_IF_ERROR(stored.status());
    current = *std::move(stored);
  }
  // kMemoryOnly: progress of a job running here.
  store::JobRecord updated = current;
  if (!mutate(&updated)) return current;
  live_[updated.job_id()] = updated;
  return updated;
}

void JobStore::DropLive(absl::string_view job_id) {
  absl::MutexLock lock(&mu_);
  if (const auto it = live_.find(job_id); it != live_.end()) live_.erase(it);
}

void JobStore::MarkClaimed(absl::string_view claimant, int64_t now_ms,
                           store::JobRecord* job) const {
  job->set_state(store::JobRecord::RUNNING);
  if (job->started_unix_ms() == 0) job->set_started_unix_ms(now_ms);
  job->set_claimant(std::string(claimant));
  job->set_runner(runner_);
  job->set_heartbeat_unix_ms(now_ms);
}

absl::StatusOr<std::optional<store::JobRecord>> JobStore::Claim(
    absl::string_view claimant, absl::Time stale_before) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  const int64_t stale_ms = absl::ToUnixMillis(stale_before);
  std::optional<store::JobRecord> claimed;
  std::vector<store::JobRecord> cancelled;
  absl::MutexLock lock(&mu_);
  BNN_RETURN_IF_ERROR(metadata_->Write([&](MetadataTransaction& tx) {
    claimed.reset();
    cancelled.clear();
    while (true) {
      BNN_ASSIGN_OR_RETURN(std::optional<store::JobRecord> next,
                           tx.NextClaimableJob(stale_ms));
      if (!next.has_value()) return absl::OkStatus();
      if (next->state() == store::JobRecord::CANCELLING) {
        // Its process stopped while the job was being cancelled.
        next->set_state(store::JobRecord::CANCELLED);
        next->set_finished_unix_ms(now_ms);
        next->set_heartbeat_unix_ms(0);
        BNN_RETURN_IF_ERROR(tx.UpdateJob(*next));
        cancelled.push_back(*std::move(next));
        continue;
      }
      MarkClaimed(claimant, now_ms, &*next);
      BNN_RETURN_IF_ERROR(tx.UpdateJob(*next));
      claimed = std::move(next);
      return absl::OkStatus();
    }
  }));
  for (const store::JobRecord& job : cancelled) {
    spdlog::warn(
        "job {} was being cancelled by {}, which stopped heartbeating; "
        "marked CANCELLED",
        job.job_id(), job.claimant());
    RemoveFile(CheckpointPath(job.job_id())).IgnoreError();
  }
  if (claimed.has_value()) live_[claimed->job_id()] = *claimed;
  return claimed;
}

bool JobStore::HasClaimable(absl::Time stale_before) const {
  const int64_t stale_ms = absl::ToUnixMillis(stale_before);
  const absl::StatusOr<bool> found = metadata_->Read([&](MetadataReader& r)
                                                         -> absl::StatusOr<
                                                             bool> {
    JobFilter waiting;
    waiting.states = {store::JobRecord::QUEUED, store::JobRecord::INTERRUPTED};
    PageRequest one;
    one.page_size = 1;
    BNN_ASSIGN_OR_RETURN(const Page<store::JobRecord> queued,
                         r.ListJobs(waiting, one));
    if (!queued.items.empty()) return true;
    JobFilter active;
    active.states = {store::JobRecord::RUNNING, store::JobRecord::CANCELLING};
    PageRequest page;
    page.page_size = kMaxPageSize;
    do {
      BNN_ASSIGN_OR_RETURN(Page<store::JobRecord> running,
                           r.ListJobs(active, page));
      for (const store::JobRecord& job : running.items) {
        if (job.heartbeat_unix_ms() < stale_ms) return true;
      }
      page.page_token = std::move(running.next_page_token);
    } while (!page.page_token.empty());
    return false;
  });
  if (!found.ok()) {
    spdlog::error("cannot look for claimable jobs: {}",
                  found.status().ToString());
    return true;  // Claim reports the error
  }
  return *found;
}

absl::StatusOr<store::JobRecord> JobStore::ClaimJob(absl::string_view job_id,
                                                    absl::string_view claimant,
                                                    absl::Time stale_before) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  const int64_t stale_ms = absl::ToUnixMillis(stale_before);
  store::JobRecord job;
  absl::MutexLock lock(&mu_);
  BNN_RETURN_IF_ERROR(metadata_->Write([&](MetadataTransaction& tx)
                                           -> absl::Status {
    absl::StatusOr<store::JobRecord> found = tx.GetJob(job_id);
    if (absl::IsNotFound(found.status())) return UnknownJob(job_id);
    BNN_RETURN_IF_ERROR(found.status());
    job = *std::move(found);
    const store::JobRecord::State state = job.state();
    const bool claimable = state == store::JobRecord::QUEUED ||
                           state == store::JobRecord::INTERRUPTED ||
                           (state == store::JobRecord::RUNNING &&
                            job.heartbeat_unix_ms() < stale_ms);
    if (!claimable) {
      std::string message = absl::StrCat("job ", job_id, " is ",
                                         store::JobRecord::State_Name(state));
      if (IsActive(state)) {
        absl::StrAppend(&message, " on ", job.claimant(), " (last heartbeat ",
                        (now_ms - job.heartbeat_unix_ms()) / 1000, " s ago)");
      }
      absl::StrAppend(&message,
                      "; only a QUEUED or INTERRUPTED job, or a RUNNING "
                      "one whose process stopped heartbeating, can be "
                      "claimed");
      absl::Status refused = absl::FailedPreconditionError(message);
      if (state == store::JobRecord::RUNNING) {
        refused.SetPayload(kLiveClaimantPayload, absl::Cord(job.claimant()));
      }
      return refused;
    }
    MarkClaimed(claimant, now_ms, &job);
    return tx.UpdateJob(job);
  }));
  live_[job.job_id()] = job;
  return job;
}

absl::StatusOr<store::JobRecord> JobStore::Heartbeat(
    absl::string_view job_id, absl::string_view claimant) {
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  return Update(job_id, [&](store::JobRecord* r) {
    if (r->claimant() != claimant || !IsActive(r->state())) return false;
    r->set_heartbeat_unix_ms(now_ms);
    return true;
  });
}

std::vector<store::JobRecord> JobStore::List(const JobFilter& filter) const {
  std::vector<store::JobRecord> jobs;
  const absl::Status status = metadata_->Read([&](MetadataReader& r) {
    PageRequest page;
    page.page_size = kMaxPageSize;
    do {
      BNN_ASSIGN_OR_RETURN(Page<store::JobRecord> records,
                           r.ListJobs(filter, page));
      for (store::JobRecord& job : records.items) {
        jobs.push_back(std::move(job));
      }
      page.page_token = std::move(records.next_page_token);
    } while (!page.page_token.empty());
    return absl::OkStatus();
  });
  if (!status.ok()) spdlog::error("cannot list jobs: {}", status.ToString());
  absl::MutexLock lock(&mu_);
  for (store::JobRecord& job : jobs) job = WithLive(std::move(job));
  return jobs;
}

std::vector<store::JobRecord> JobStore::InState(
    store::JobRecord::State state) const {
  JobFilter filter;
  filter.states = {state};
  std::vector<store::JobRecord> jobs = List(filter);
  std::reverse(jobs.begin(), jobs.end());
  jobs.erase(
      std::remove_if(jobs.begin(), jobs.end(),
                     [&](const store::JobRecord& job) { return !Runs(job); }),
      jobs.end());
  return jobs;
}

std::vector<store::JobRecord> JobStore::Queued() const {
  return InState(store::JobRecord::QUEUED);
}

std::vector<store::JobRecord> JobStore::Interrupted() const {
  return InState(store::JobRecord::INTERRUPTED);
}

absl::StatusOr<std::vector<store::JobRecord>> JobStore::ListNewestFirst(
    const JobFilter& filter, const std::optional<JobCursor>& after, int limit,
    bool* more) const {
  PageRequest page;
  page.page_size = limit;
  if (after.has_value()) {
    page.page_token =
        EncodePageToken(kJobsList, after->created_unix_ms, after->job_id);
  }
  BNN_ASSIGN_OR_RETURN(Page<store::JobRecord> records,
                       metadata_->Read([&](MetadataReader& r) {
                         return r.ListJobs(filter, page);
                       }));
  *more = !records.next_page_token.empty();
  absl::MutexLock lock(&mu_);
  for (store::JobRecord& job : records.items) job = WithLive(std::move(job));
  return std::move(records.items);
}

std::map<store::JobRecord::State, int64_t> JobStore::CountByState() const {
  std::map<store::JobRecord::State, int64_t> counts;
  const absl::StatusOr<std::vector<std::pair<store::JobRecord::State, int64_t>>>
      counted = metadata_->Read(
          [](MetadataReader& r) { return r.CountJobsByState(); });
  if (!counted.ok()) {
    spdlog::error("cannot count jobs: {}", counted.status().ToString());
    return counts;
  }
  for (const auto& [state, count] : *counted) counts[state] = count;
  return counts;
}

}  // namespace bnn::server
