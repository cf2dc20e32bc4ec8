// main() of the Google Benchmark programs (bnn_perf_bench, bnn_store_bench):
// benchmark_main's, plus the build block of bench/common/provenance.h in the
// report's "context" (issue 16: a committed benchmark JSON must name the
// binary that produced it well enough to rebuild it, as the experiment
// records do). Keys: bnn_build_commit, bnn_build_tree_clean, bnn_binary,
// bnn_binary_sha256 and, when the executable could not be read,
// bnn_build_error.
#include <string>

#include <benchmark/benchmark.h>

#include "bench/common/provenance.h"

int main(int argc, char** argv) {
  const nlohmann::json build = bnn::bench::ProvenanceJson();
  for (const auto& [key, value] : build.items()) {
    const std::string name = key == "binary" || key == "binary_sha256"
                                 ? "bnn_" + key
                                 : "bnn_build_" + key;
    benchmark::AddCustomContext(
        name, value.is_string() ? value.get<std::string>() : value.dump());
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
