// Shared pieces of the latency benchmarks: per-request timing with
// percentiles, the machine's GEMM throughput as a reference, reporting, and a
// real bnn-server on loopback as a gRPC target.
#ifndef BNN_BENCH_PERF_LATENCY_HARNESS_H_
#define BNN_BENCH_PERF_LATENCY_HARNESS_H_

#include <functional>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "bnn/io/snapshot.h"

namespace bnn::bench {

struct Result {
  std::string name, mode;
  int rows = 0, samples = 0;
  bool cached = false;
  double flops = 0;             // per request
  std::vector<double> seconds;  // one per request

  double Percentile(double p) const;
  double RowSamplesPerSecond() const;
  double GflopsPerSecond() const;
  void Describe(std::string name_, std::string mode_, int rows_, int samples_,
                bool cached_, double flops_);
};

// Runs `request` repeatedly for at least `min_seconds` (and 10 times), after
// one untimed warm-up call.
Result Measure(double min_seconds, const std::function<void()>& request);

struct GemmThroughput {
  double float_gflops = 0;
  double double_gflops = 0;
};
// Eigen GEMM of 2048^3 with the default (OpenMP) thread count.
GemmThroughput MeasureGemm();

struct Report {
  GemmThroughput gemm;
  std::vector<Result> results;
  // The bnn-server the gRPC cases ran against (empty: in-process only), for
  // the JSON's build block (bench/common/provenance.h).
  std::string server_binary;
  void Print() const;
  absl::Status WriteJson(const std::string& path) const;
};

// A bnn-server child process on 127.0.0.1:0 with a temporary store.
class GrpcTarget {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcTarget>> Start(
      const std::string& server_binary,
      const std::vector<std::string>& extra_args = {});
  ~GrpcTarget();

  // The server's HOST:PORT, for clients of other channel settings.
  const std::string& address() const { return address_; }

  // Imports `snapshot` (ImportSnapshot) and returns its id on the server.
  absl::StatusOr<std::string> Import(const Snapshot& snapshot);
  absl::Status Predict(const std::string& snapshot_id,
                       const std::vector<double>& rows, int num_features,
                       int num_samples, uint64_t seed);

 private:
  struct Stub;
  GrpcTarget() = default;

  pid_t pid_ = -1;
  std::string dir_;
  std::string address_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace bnn::bench

#endif  // BNN_BENCH_PERF_LATENCY_HARNESS_H_
