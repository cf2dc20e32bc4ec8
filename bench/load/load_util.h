// Small pieces of bnn_load_test: latency summaries, status tallies, a
// channel with its own TCP connection, and the server's resident memory.
#ifndef BNN_BENCH_LOAD_LOAD_UTIL_H_
#define BNN_BENCH_LOAD_LOAD_UTIL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>
#include <grpcpp/channel.h>
#include <nlohmann/json.hpp>

namespace bnn::bench {

// Percentiles of a set of durations, in milliseconds (nearest rank).
struct LatencySummary {
  int64_t count = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;

  nlohmann::json ToJson() const;
  // "n=… p50 … p90 … p99 … max … ms".
  std::string ToString() const;
};

// `seconds` is sorted in place.
LatencySummary Summarize(std::vector<double>& seconds);

// Outcomes of a kind of call: per status code, how many and how long they
// took, and the first message seen. Thread-safe.
class CallTally {
 public:
  void Add(const absl::Status& status, absl::Duration took);

  int64_t total() const;
  // Calls whose code is not in `expected`.
  int64_t CountOtherThan(const std::vector<absl::StatusCode>& expected) const;
  // {"calls": n, "codes": {"CODE": {"count": n, "latency": {...},
  // "message": "..."}}}.
  nlohmann::json ToJson() const;
  // "n=… CODE=… (p50 … ms, max … ms) …", one entry per code.
  std::string ToString() const;

 private:
  struct Code {
    std::vector<double> seconds;
    std::string message;  // the first one
  };
  mutable absl::Mutex mu_;
  std::map<absl::StatusCode, Code> codes_ ABSL_GUARDED_BY(mu_);
};

// A plaintext channel to `target` that opens its own TCP connection instead
// of sharing one with other channels to the same target (gRPC's global
// subchannel pool), so that the server sees one client per channel: its
// fair queueing keys clients by connection. Unlimited receive size.
std::shared_ptr<grpc::Channel> OwnConnection(const std::string& target);

// VmRSS of process `pid` in KiB, or -1 if it cannot be read.
int64_t ReadRssKib(pid_t pid);

// CPU time (user + system) process `pid` has used, in seconds, or -1.
double ProcessCpuSeconds(pid_t pid);

// CPU time all cores of the machine have spent busy (not idle nor waiting
// for I/O) since boot, in seconds (/proc/stat), or -1.
double MachineBusyCpuSeconds();

}  // namespace bnn::bench

#endif  // BNN_BENCH_LOAD_LOAD_UTIL_H_
