// Peak resident memory of a training job against its estimate (issue 15:
// "report peak RSS of an MNIST-size SLANG job and hold it <= 1.5x of (mu, U,
// d, momentum + one minibatch's activations + the method's workspaces as
// documented)"). Builds a synthetic dataset of the MNIST shape (784
// features, 10 classes), reads VmRSS once it is held, trains with bnn::Train
// and reads the process's high-water mark (VmHWM): the difference is what
// training added. It is printed beside bnn::EstimateTrainingMemory, whole
// and without the parts that are not the method's (the dataset's
// standardised copy, the snapshot's encoding after training).
//
//   build/bench/perf/bnn_train_memory --rows 10000 --steps 5
//       [--method slang --param rank=32,mc_samples=4,batch_size=200]
//       [--json_out FILE]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>
#include <nlohmann/json.hpp>

#include "bnn/check.h"
#include "bnn/memory.h"
#include "bnn/methods/registry.h"
#include "bnn/random.h"
#include "bnn/train/plan.h"
#include "bnn/train/trainer.h"

#include "bench/common/provenance.h"

ABSL_FLAG(int, rows, 10000, "training rows (784 features, 10 classes)");
ABSL_FLAG(int, steps, 5, "training steps");
ABSL_FLAG(std::string, method, "slang", "method");
ABSL_FLAG(std::string, hidden, "400,400", "hidden widths");
ABSL_FLAG(std::vector<std::string>, param,
          std::vector<std::string>({"rank=32", "mc_samples=4",
                                    "batch_size=200"}),
          "method parameters k=v, comma-separated");
ABSL_FLAG(std::string, json_out, "",
          "Also write the figures, the estimate's parts and the build block "
          "(bench/common/provenance.h) here as JSON.");

namespace bnn {
namespace {

// A field of /proc/self/status in bytes (e.g. "VmHWM").
int64_t StatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, field + ":")) continue;
    int64_t kib = 0;
    std::vector<std::string> parts =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) {
      return kib * 1024;
    }
  }
  return -1;
}

int Run() {
  const int rows = absl::GetFlag(FLAGS_rows);
  Dataset data;
  data.task = Task::kMulticlass;
  data.num_features = 784;
  data.num_classes = 10;
  for (int c = 0; c < 10; ++c) data.class_values.push_back(c);
  data.features.resize(static_cast<size_t>(rows) * 784);
  data.targets.resize(rows);
  CounterRng rng(1);
  rng.FillUniform(0, 0, data.features.data(), data.features.size());
  for (int i = 0; i < rows; ++i) data.targets[i] = i % 10;

  TrainRequest request;
  request.method = absl::GetFlag(FLAGS_method);
  for (absl::string_view w : absl::StrSplit(absl::GetFlag(FLAGS_hidden), ',')) {
    int width = 0;
    BNN_CHECK(absl::SimpleAtoi(w, &width));
    request.hidden_sizes.push_back(width);
  }
  for (const std::string& kv : absl::GetFlag(FLAGS_param)) {
    std::vector<std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    BNN_CHECK(p.size() == 2);
    request.params[p[0]] = p[1];
  }
  request.params["steps"] = std::to_string(absl::GetFlag(FLAGS_steps));
  request.params["seed"] = "1";
  const MethodRegistry& registry = MethodRegistry::Builtin();
  absl::StatusOr<TrainingPlan> plan =
      ResolveTrainingPlan(request, ShapeOf(data), nullptr, registry);
  BNN_CHECK_OK(plan.status());
  absl::StatusOr<MemoryEstimate> estimate =
      EstimateTrainingMemory(*plan, registry);
  BNN_CHECK_OK(estimate.status());

  const int64_t before = StatusBytes("VmRSS");
  absl::StatusOr<Snapshot> snapshot = Train(*plan, data, nullptr, registry);
  BNN_CHECK_OK(snapshot.status());
  const int64_t peak = StatusBytes("VmHWM");
  const int64_t added = peak - before;

  int64_t method_bytes = 0;
  std::printf("%s, %d rows, %s, %d steps\n", request.method.c_str(), rows,
              absl::GetFlag(FLAGS_hidden).c_str(), absl::GetFlag(FLAGS_steps));
  nlohmann::json parts = nlohmann::json::array();
  std::printf("estimate parts:\n");
  for (const MemoryEstimate::Part& part : estimate->parts) {
    parts.push_back({{"what", part.what}, {"bytes", part.bytes}});
    std::printf("  %-70s %s\n", part.what.c_str(),
                FormatBytes(part.bytes).c_str());
    // The dataset as the caller holds it is resident before training.
    if (!absl::StrContains(part.what, "training set")) {
      method_bytes += part.bytes;
    }
  }
  std::printf("estimate, whole:                        %s\n",
              FormatBytes(estimate->bytes).c_str());
  std::printf("estimate without the caller's dataset:  %s\n",
              FormatBytes(method_bytes).c_str());
  std::printf("RSS before training:                    %s\n",
              FormatBytes(before).c_str());
  std::printf("peak RSS (VmHWM) after training:        %s\n",
              FormatBytes(peak).c_str());
  std::printf(
      "training added (peak - before):         %s = %.2fx the "
      "estimate without the dataset\n",
      FormatBytes(added).c_str(), static_cast<double>(added) / method_bytes);
  if (const std::string path = absl::GetFlag(FLAGS_json_out); !path.empty()) {
    const nlohmann::json record = {
        {"build", bench::ProvenanceJson()},
        {"method", request.method},
        {"rows", rows},
        {"hidden", absl::GetFlag(FLAGS_hidden)},
        {"steps", absl::GetFlag(FLAGS_steps)},
        {"params", request.params},
        {"estimate_parts", parts},
        {"estimate_bytes", estimate->bytes},
        {"estimate_without_dataset_bytes", method_bytes},
        {"rss_before_bytes", before},
        {"peak_rss_bytes", peak},
        {"added_bytes", added},
        {"added_over_estimate", static_cast<double>(added) / method_bytes}};
    std::ofstream out(path);
    out << record.dump(1) << "\n";
    if (!out.good()) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace bnn

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return bnn::Run();
}
