#include "server/store/job_store.h"

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/io/record.h"
#include "bnn/status.h"

#include "server/store/ids.h"
#include "server/store/record_dir.h"

namespace bnn::server {
namespace {

constexpr RecordFormat kJobFormat{"BNNJOB01", 1, "job record"};
constexpr absl::string_view kExtension = ".job";

}  // namespace

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
      record->set_state(store::JobRecord::FAILED);
      record->set_error(std::string(kRestartedJobError));
      record->set_finished_unix_ms(now_ms);
      BNN_RETURN_IF_ERROR(store->Write(*record));
      spdlog::warn("job {} was interrupted by a restart; marked FAILED", id);
    }
    entry.record = *std::move(record);
  }
  return store;
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
  std::vector<store::JobRecord> queued;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, entry] : entries_) {
      if (entry.status.ok() &&
          entry.record.state() == store::JobRecord::QUEUED) {
        queued.push_back(entry.record);
      }
    }
  }
  std::stable_sort(queued.begin(), queued.end(),
                   [](const store::JobRecord& a, const store::JobRecord& b) {
                     return a.created_unix_ms() < b.created_unix_ms();
                   });
  return queued;
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
