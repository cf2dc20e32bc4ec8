#include "server/store/job_store.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/io/file.h"
#include "bnn/io/record.h"
#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/record_dir.h"

namespace bnn::server {
namespace {

constexpr RecordFormat kJobFormat{"BNNJOB01", 1, "job record"};
constexpr absl::string_view kExtension = ".job";
constexpr absl::string_view kCheckpointExtension = ".ckpt";

// Newest first: creation time, then id, both descending.
bool NewerThan(int64_t a_ms, absl::string_view a_id, int64_t b_ms,
               absl::string_view b_id) {
  return std::tie(a_ms, a_id) > std::tie(b_ms, b_id);
}

}  // namespace

bool IsFinalJobState(store::JobRecord::State state) {
  return state == store::JobRecord::SUCCEEDED ||
         state == store::JobRecord::FAILED ||
         state == store::JobRecord::CANCELLED;
}

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(std::string dir) {
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> ids,
                       ScanRecordDir(dir, kJobIdPrefix, kExtension));
  std::unique_ptr<JobStore> store(new JobStore(std::move(dir)));
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&store->mu_);
  for (const std::string& id : ids) {
    Entry& entry = store->entries_[id];
    absl::StatusOr<store::JobRecord> record = store->Read(id);
    if (!record.ok()) {
      spdlog::error("job {} is unreadable: {}", id, record.status().ToString());
      entry.status = record.status();
      entry.record.set_job_id(id);
      continue;
    }
    if (record->state() == store::JobRecord::RUNNING) {
      // Its process is gone: resumable from its last checkpoint.
      record->set_state(store::JobRecord::INTERRUPTED);
      BNN_RETURN_IF_ERROR(store->Write(*record));
      spdlog::warn(
          "job {} was running when its server stopped; marked INTERRUPTED", id);
    } else if (record->state() == store::JobRecord::CANCELLING) {
      record->set_state(store::JobRecord::CANCELLED);
      record->set_finished_unix_ms(now_ms);
      BNN_RETURN_IF_ERROR(store->Write(*record));
      spdlog::warn(
          "job {} was being cancelled when its server stopped; "
          "marked CANCELLED",
          id);
    }
    entry.record = *std::move(record);
  }
  // Checkpoints are kept only for jobs that may still resume.
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> checkpoints,
                       ScanRecordStems(store->dir_, kCheckpointExtension));
  for (const std::string& id : checkpoints) {
    const auto it = store->entries_.find(id);
    if (it != store->entries_.end() &&
        (!it->second.status.ok() ||
         !IsFinalJobState(it->second.record.state()))) {
      continue;
    }
    spdlog::info("deleting the checkpoint of finished or unknown job {}", id);
    BNN_RETURN_IF_ERROR(RemoveFile(store->CheckpointPath(id)));
  }
  return store;
}

std::string JobStore::CheckpointPath(absl::string_view job_id) const {
  return absl::StrCat(dir_, "/", job_id, kCheckpointExtension);
}

std::string JobStore::PathOf(absl::string_view job_id) const {
  return absl::StrCat(dir_, "/", job_id, kExtension);
}

absl::Status JobStore::Write(const store::JobRecord& record) const {
  return WriteRecordFile(PathOf(record.job_id()), kJobFormat, record);
}

absl::StatusOr<store::JobRecord> JobStore::Read(
    const std::string& job_id) const {
  const std::string path = PathOf(job_id);
  store::JobRecord record;
  BNN_RETURN_IF_ERROR(ReadRecordFile(path, kJobFormat, &record).status());
  if (record.job_id() != job_id) {
    return absl::DataLossError(
        absl::StrCat(path, ": holds job_id '", record.job_id(), "'"));
  }
  return record;
}

absl::StatusOr<store::JobRecord> JobStore::Create(store::JobRecord record) {
  absl::MutexLock lock(&mu_);
  do {
    record.set_job_id(NewId(kJobIdPrefix));
  } while (entries_.count(record.job_id()) > 0);
  record.set_state(store::JobRecord::QUEUED);
  record.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  BNN_RETURN_IF_ERROR(Write(record));
  entries_[record.job_id()] = Entry{absl::OkStatus(), record};
  return record;
}

absl::StatusOr<store::JobRecord> JobStore::Get(absl::string_view job_id) const {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(job_id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("job_id '", job_id, "' not found"));
  }
  if (!it->second.status.ok()) return it->second.status;
  return it->second.record;
}

absl::StatusOr<store::JobRecord> JobStore::Update(
    absl::string_view job_id, absl::FunctionRef<bool(store::JobRecord*)> mutate,
    Durability durability) {
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(job_id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("job_id '", job_id, "' not found"));
  }
  if (!it->second.status.ok()) return it->second.status;
  store::JobRecord updated = it->second.record;
  if (!mutate(&updated)) return it->second.record;
  if (durability == Durability::kPersist) {
    BNN_RETURN_IF_ERROR(Write(updated));
  }
  it->second.record = updated;
  return updated;
}

std::vector<store::JobRecord> JobStore::Queued() const {
  return InState(store::JobRecord::QUEUED);
}

std::vector<store::JobRecord> JobStore::Interrupted() const {
  return InState(store::JobRecord::INTERRUPTED);
}

std::vector<store::JobRecord> JobStore::InState(
    store::JobRecord::State state) const {
  std::vector<store::JobRecord> jobs;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : entries_) {
      if (entry.status.ok() && entry.record.state() == state) {
        jobs.push_back(entry.record);
      }
    }
  }
  // Ids break ties: entries_ is ordered by id.
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const store::JobRecord& a, const store::JobRecord& b) {
                     return a.created_unix_ms() < b.created_unix_ms();
                   });
  return jobs;
}

std::vector<store::JobRecord> JobStore::ListNewestFirst(
    const JobFilter& filter, const std::optional<JobCursor>& after, int limit,
    bool* more) const {
  absl::MutexLock lock(&mu_);
  std::vector<const store::JobRecord*> matching;
  for (const auto& [id, entry] : entries_) {
    if (!entry.status.ok() || !filter.Matches(entry.record)) continue;
    if (after.has_value() && !NewerThan(after->created_unix_ms, after->job_id,
                                        entry.record.created_unix_ms(), id)) {
      continue;
    }
    matching.push_back(&entry.record);
  }
  const size_t page = std::min(matching.size(), static_cast<size_t>(limit));
  const auto newer = [](const store::JobRecord* a, const store::JobRecord* b) {
    return NewerThan(a->created_unix_ms(), a->job_id(), b->created_unix_ms(),
                     b->job_id());
  };
  std::partial_sort(matching.begin(), matching.begin() + page, matching.end(),
                    newer);
  *more = matching.size() > page;
  std::vector<store::JobRecord> jobs;
  jobs.reserve(page);
  for (size_t i = 0; i < page; ++i) jobs.push_back(*matching[i]);
  return jobs;
}

std::map<store::JobRecord::State, int64_t> JobStore::CountByState() const {
  std::map<store::JobRecord::State, int64_t> counts;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, entry] : entries_) {
    if (entry.status.ok()) ++counts[entry.record.state()];
  }
  return counts;
}

std::vector<store::JobRecord> JobStore::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<store::JobRecord> records;
  for (const auto& [id, entry] : entries_) {
    if (entry.status.ok()) records.push_back(entry.record);
  }
  return records;
}

}  // namespace bnn::server
