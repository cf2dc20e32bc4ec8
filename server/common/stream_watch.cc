#include "server/common/stream_watch.h"

#include <algorithm>

#include <absl/time/clock.h>

namespace bnn::server {

StreamWatch::StreamWatch(int max_streams, absl::Duration idle_timeout)
    : max_streams_(max_streams), idle_timeout_(idle_timeout) {
  thread_ = std::thread([this] { Run(); });
}

StreamWatch::~StreamWatch() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

bool StreamWatch::Add(Stream* stream) {
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(streams_.size()) >= max_streams_) return false;
  streams_.insert(stream);
  return true;
}

void StreamWatch::Remove(Stream* stream) {
  absl::MutexLock lock(&mu_);
  streams_.erase(stream);
  ended_.erase(stream);
}

int StreamWatch::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

void StreamWatch::Run() {
  // Idle streams end within a quarter of the timeout after it passes.
  const absl::Duration period =
      std::clamp(idle_timeout_ / 4, absl::Milliseconds(10), absl::Seconds(1));
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
    const absl::Time now = absl::Now();
    for (Stream* stream : streams_) {
      if (ended_.count(stream) == 0 &&
          now - stream->WaitingSince() > idle_timeout_) {
        ended_.insert(stream);
        stream->OnIdle();
      }
    }
  }
}

}  // namespace bnn::server
