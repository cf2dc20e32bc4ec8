#include "server/jobs/job_events.h"

#include <utility>

#include "server/store/job_store.h"

namespace bnn::server {

JobEvent EventOfRecord(const store::JobRecord& job, JobEvent::Kind kind) {
  JobEvent event;
  event.kind = kind;
  event.state = job.state();
  event.epoch = job.epoch();
  event.step = job.step();
  event.total_steps = job.total_steps();
  event.loss = job.last_loss();
  event.error = job.error();
  event.snapshot_id = job.snapshot_id();
  return event;
}

std::vector<JobEvents::Wake> JobEvents::WakesOf(const Entry& entry) {
  std::vector<Wake> wakes;
  wakes.reserve(entry.watchers.size());
  for (const auto& [id, wake] : entry.watchers) wakes.push_back(wake);
  return wakes;
}

JobEvents::Start JobEvents::Watch(absl::string_view job_id,
                                  std::optional<int64_t> after_step,
                                  Wake wake) {
  absl::MutexLock lock(&mu_);
  Entry& entry = jobs_[std::string(job_id)];
  Start start;
  start.subscription = next_subscription_++;
  entry.watchers.emplace(start.subscription, std::move(wake));
  start.last_seq = entry.next_seq - 1;
  if (after_step.has_value()) {
    for (const JobEvent& event : entry.events) {
      if (event.step > *after_step) start.backlog.push_back(event);
    }
  }
  return start;
}

void JobEvents::Unsubscribe(absl::string_view job_id, uint64_t subscription) {
  absl::MutexLock lock(&mu_);
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  it->second.watchers.erase(subscription);
  // The entry of a job that published nothing (e.g. one that finished
  // before the watch began).
  if (it->second.watchers.empty() && it->second.events.empty()) {
    jobs_.erase(it);
  }
}

std::vector<JobEvent> JobEvents::Take(absl::string_view job_id,
                                      uint64_t* last_seq) {
  absl::MutexLock lock(&mu_);
  std::vector<JobEvent> taken;
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return taken;
  for (const JobEvent& event : it->second.events) {
    if (event.seq > *last_seq) taken.push_back(event);
  }
  if (!taken.empty()) *last_seq = taken.back().seq;
  return taken;
}

void JobEvents::Publish(absl::string_view job_id, JobEvent event) {
  const bool final =
      event.kind == JobEvent::Kind::kState && IsFinalJobState(event.state);
  std::vector<Wake> wakes;
  {
    absl::MutexLock lock(&mu_);
    Entry& entry = jobs_[std::string(job_id)];
    event.seq = entry.next_seq++;
    if (event.kind == JobEvent::Kind::kState) {
      entry.running = event.state == store::JobRecord::RUNNING ||
                      event.state == store::JobRecord::CANCELLING;
    }
    entry.events.push_back(std::move(event));
    if (entry.events.size() > static_cast<size_t>(kMaxKeptEvents)) {
      entry.events.pop_front();
    }
    wakes = WakesOf(entry);
  }
  for (const Wake& wake : wakes) wake();
  if (final) {
    // Every watcher took the final event in its wake-up; later watches
    // read the job's record.
    absl::MutexLock lock(&mu_);
    jobs_.erase(std::string(job_id));
  }
}

void JobEvents::Close() {
  std::vector<Wake> wakes;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    for (const auto& [id, entry] : jobs_) {
      for (const auto& [subscription, wake] : entry.watchers) {
        wakes.push_back(wake);
      }
    }
  }
  for (const Wake& wake : wakes) wake();
}

bool JobEvents::Closing(absl::string_view job_id) const {
  absl::MutexLock lock(&mu_);
  if (!closing_) return false;
  const auto it = jobs_.find(job_id);
  return it == jobs_.end() || !it->second.running;
}

int JobEvents::watchers() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [id, entry] : jobs_) {
    n += static_cast<int>(entry.watchers.size());
  }
  return n;
}

}  // namespace bnn::server
