#include "server/common/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include <absl/time/clock.h>

#include "bnn/check.h"

#include "server/common/thread_priority.h"

namespace bnn::server {
namespace {

// The closure the calling thread runs for a pool, for Yield().
struct Current {
  ThreadPool* pool = nullptr;
  int thread = 0;
  const std::string* key = nullptr;
  absl::Time turn_start;
  // Time in earlier turns.
  absl::Duration ran;
  // The thread's priority was lowered (Options::demote_after).
  bool demoted = false;
};
thread_local Current* current = nullptr;

}  // namespace

ThreadPool::ThreadPool(const Options& options) : options_(options) {
  BNN_CHECK(options.num_threads >= 1);
  BNN_CHECK(options.max_yielded >= 0);
  BNN_CHECK(options.slice >= absl::ZeroDuration());
  BNN_CHECK(options.usage_half_life > absl::ZeroDuration());
  BNN_CHECK(options.demote_after >= absl::ZeroDuration());
  BNN_CHECK(options.demoted_nice >= 1 && options.demoted_nice <= 19);
  const int threads = options.num_threads + options.max_yielded;
  {
    absl::MutexLock lock(&mu_);
    busy_since_.assign(threads, absl::InfinitePast());
  }
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] { WorkLoop(i); });
  }
  if (options.demote_after > absl::ZeroDuration()) {
    spawner_ = std::thread([this] { SpawnLoop(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  // No thread ends for replacement once stopping_ is set (WorkLoop), and the
  // spawner returns after the replacements already asked for.
  if (spawner_.joinable()) spawner_.join();
  for (std::thread& thread : threads_) thread.join();
}

bool ThreadPool::HasReplacementOrStopping() const {
  return !replace_.empty() || stopping_;
}

void ThreadPool::SpawnLoop() {
  while (true) {
    int slot;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ThreadPool::HasReplacementOrStopping));
      if (replace_.empty()) return;
      slot = replace_.back();
      replace_.pop_back();
      ++threads_replaced_;
    }
    // The old thread has returned from WorkLoop or is about to.
    threads_[slot].join();
    threads_[slot] = std::thread([this, slot] { WorkLoop(slot); });
  }
}

void ThreadPool::Schedule(absl::string_view key,
                          absl::AnyInvocable<void() &&> task) {
  absl::MutexLock lock(&mu_);
  BNN_CHECK(!stopping_);
  keys_[std::string(key)].pending.push_back({std::move(task), nullptr});
  ++queued_;
  Dispatch();
}

absl::Duration ThreadPool::UsageAt(const Key& key, absl::Time now) const {
  if (key.usage == absl::ZeroDuration()) return key.usage;
  return key.usage * std::exp2(-absl::FDivDuration(now - key.usage_as_of,
                                                   options_.usage_half_life));
}

void ThreadPool::EndTurn(Key* key, absl::Time turn_start, absl::Time now) {
  key->usage = UsageAt(*key, now) + (now - turn_start);
  key->usage_as_of = now;
}

void ThreadPool::Dispatch() {
  const absl::Time now = absl::Now();
  // Times in whole slices, so that closures that take about as long are
  // served in turn.
  const absl::Duration unit = std::max(options_.slice, absl::Microseconds(100));
  const auto slices = [&](absl::Duration d) -> int64_t {
    return static_cast<int64_t>(absl::FDivDuration(d, unit));
  };
  // Every turn given to a new closure finds an idle thread: threads hold
  // turns or wait in Yield(), and there are num_threads + max_yielded.
  while (active_ < options_.num_threads) {
    // (running, slices the front closure ran, slices of usage, last_start)
    using Rank = std::tuple<int, int64_t, int64_t, uint64_t>;
    auto next = keys_.end();
    Rank best;
    for (auto it = keys_.begin(); it != keys_.end(); ++it) {
      const Key& k = it->second;
      if (k.pending.empty()) continue;
      const Resume* resume = k.pending.front().resume;
      const Rank rank{k.running, resume == nullptr ? -1 : slices(resume->ran),
                      slices(UsageAt(k, now)), k.last_start};
      if (next == keys_.end() || rank < best) {
        next = it;
        best = rank;
      }
    }
    if (next == keys_.end()) break;
    Key& state = next->second;
    Entry entry = std::move(state.pending.front());
    state.pending.pop_front();
    ++state.running;
    state.last_start = ++starts_;
    ++active_;
    if (entry.resume != nullptr) {
      entry.resume->granted = true;
    } else {
      --queued_;
      ready_.push_back({next->first, std::move(entry.task)});
    }
  }
  // Idle keys are remembered while their usage still counts.
  for (auto it = keys_.begin(); it != keys_.end();) {
    const Key& k = it->second;
    if (k.running == 0 && k.pending.empty() && UsageAt(k, now) < unit) {
      it = keys_.erase(it);
    } else {
      ++it;
    }
  }
}

bool ThreadPool::HasReadyOrDrained() const {
  return !ready_.empty() || (stopping_ && queued_ == 0);
}

absl::Duration ThreadPool::Yield() {
  Current* const c = current;
  if (c == nullptr || c->pool != this) return absl::ZeroDuration();
  const absl::Time called = absl::Now();
  if (options_.demote_after > absl::ZeroDuration() && !c->demoted &&
      c->ran + (called - c->turn_start) >= options_.demote_after) {
    c->demoted = true;
    LowerThreadPriority(options_.demoted_nice);
  }
  if (options_.max_yielded == 0 || called - c->turn_start < options_.slice) {
    return absl::ZeroDuration();
  }
  absl::MutexLock lock(&mu_);
  if (yielded_ >= options_.max_yielded) return absl::ZeroDuration();
  const bool other_waits =
      std::any_of(keys_.begin(), keys_.end(), [&](const auto& entry) {
        return entry.first != *c->key && !entry.second.pending.empty();
      });
  if (!other_waits) return absl::ZeroDuration();
  // Give the turn up as if finished, first in line for the key's next one;
  // the key counts as served until now.
  Key& own = keys_.find(*c->key)->second;
  const absl::Time now = absl::Now();
  c->ran += now - c->turn_start;
  Resume resume;
  resume.ran = c->ran;
  own.pending.push_front({nullptr, &resume});
  --own.running;
  own.last_start = ++starts_;
  EndTurn(&own, c->turn_start, now);
  --active_;
  ++yielded_;
  busy_since_[c->thread] = absl::InfinitePast();
  Dispatch();
  const absl::Time yielded_at = absl::Now();
  mu_.Await(absl::Condition(&resume.granted));
  --yielded_;
  const absl::Time resumed = absl::Now();
  busy_since_[c->thread] = resumed;
  c->turn_start = resumed;
  return resumed - yielded_at;
}

absl::Duration ThreadPool::AllBusyFor() const {
  absl::MutexLock lock(&mu_);
  int busy = 0;
  absl::Time latest = absl::InfinitePast();
  for (const absl::Time since : busy_since_) {
    if (since == absl::InfinitePast()) continue;
    ++busy;
    latest = std::max(latest, since);
  }
  if (busy < options_.num_threads) return absl::ZeroDuration();
  return absl::Now() - latest;
}

int64_t ThreadPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

int64_t ThreadPool::threads_replaced() const {
  absl::MutexLock lock(&mu_);
  return threads_replaced_;
}

void ThreadPool::WorkLoop(int thread) {
  while (true) {
    Ready ready;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &ThreadPool::HasReadyOrDrained));
      if (ready_.empty()) return;  // stopping and drained
      ready = std::move(ready_.front());
      ready_.pop_front();
      busy_since_[thread] = absl::Now();
    }
    Current state{this, thread, &ready.key, absl::Now(), absl::ZeroDuration()};
    current = &state;
    std::move(ready.task)();
    current = nullptr;
    absl::MutexLock lock(&mu_);
    busy_since_[thread] = absl::InfinitePast();
    Key& done = keys_.find(ready.key)->second;
    --active_;
    --done.running;
    EndTurn(&done, state.turn_start, absl::Now());
    Dispatch();
    if (state.demoted && !stopping_) {
      // This thread cannot take back its priority: a fresh one replaces it.
      replace_.push_back(thread);
      return;
    }
  }
}

}  // namespace bnn::server
