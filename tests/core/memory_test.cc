// Memory estimates against what the computations really allocate: every
// registered method's training job (EstimateTrainingMemory, which includes
// the method's own VariationalMethod::EstimateMemory) and predictions
// (Predictor::EstimateMemory, EstimateAcquireMemory), at two sizes each, with
// the heap's peak measured by the counting allocator linked into this test
// (tests/test_util/alloc_counter.h). Every estimate must lie within
// [kLow, kHigh] x the measured peak: close enough to admit what fits and to
// refuse what does not, erring high.
#include "bnn/memory.h"

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bnn/io/snapshot.h"
#include "bnn/methods/registry.h"
#include "bnn/posterior/posterior.h"
#include "bnn/predict/acquisition.h"
#include "bnn/predict/predictor.h"
#include "bnn/predict/scores.h"
#include "bnn/random.h"
#include "bnn/train/checkpoint.h"
#include "bnn/train/trainer.h"

#include "tests/test_util/alloc_counter.h"

namespace bnn {
namespace {

using ::bnn::testing::HeapBytesInUse;
using ::bnn::testing::HeapPeakBytes;
using ::bnn::testing::ResetHeapPeak;

constexpr double kLow = 0.75;
constexpr double kHigh = 2.0;

TEST(MemoryEstimateTest, AddsPartsAndSaturates) {
  MemoryEstimate e;
  e.Add("a", 1024);
  e.Add("zero", 0);
  e.Add("b", 3 << 20);
  EXPECT_EQ(e.bytes, 1024 + (3 << 20));
  ASSERT_EQ(e.parts.size(), 2u);
  EXPECT_EQ(e.ToString(), "3.0 MiB (b 3.0 MiB, a 1.0 KiB)");
  EXPECT_EQ(MulBytes({int64_t{1} << 40, int64_t{1} << 40}), kMaxBytes);
  EXPECT_EQ(AddBytes(kMaxBytes, 5), kMaxBytes);
  e.Add("huge", kMaxBytes);
  EXPECT_EQ(e.bytes, kMaxBytes);
  EXPECT_EQ(FormatBytes(kMaxBytes), "more than 2 EiB");
  EXPECT_EQ(FormatBytes(512), "512 B");
}

Dataset MakeData(Task task, int n, int p) {
  Rng rng(5);
  Dataset d;
  d.task = task;
  d.num_features = p;
  // Exact sizes, as a dataset loaded from the store has them.
  d.features.reserve(n * p);
  d.targets.reserve(n);
  for (int i = 0; i < n * p; ++i) d.features.push_back(rng.Normal());
  for (int i = 0; i < n; ++i) {
    const double z = d.features[i * p] - 0.5 * d.features[i * p + 1];
    d.targets.push_back(task == Task::kRegression ? z + 0.1 * rng.Normal()
                                                  : (z > 0 ? 1.0 : 0.0));
  }
  if (task != Task::kRegression) {
    d.num_classes = 2;
    d.class_values = {0, 1};
  }
  return d;
}

struct TrainCase {
  std::string method;
  Task task;
  int rows;
  int features;
  std::vector<int> hidden;
  ParamMap params;
};

std::string CaseName(const ::testing::TestParamInfo<TrainCase>& info) {
  std::string name = info.param.method + "_n" + std::to_string(info.param.rows);
  for (int h : info.param.hidden) name += "_" + std::to_string(h);
  return name + "_" + std::to_string(info.index);
}

class TrainingMemoryTest : public ::testing::TestWithParam<TrainCase> {};

// The job's peak: the dataset as the caller loads it, Train with checkpoints
// encoded between steps (as a server's jobs take them), and encoding the
// snapshot, measured from before the dataset exists.
TEST_P(TrainingMemoryTest, EstimateIsWithinAFactorOfThePeak) {
  const TrainCase& c = GetParam();
  TrainRequest request;
  request.method = c.method;
  request.hidden_sizes = c.hidden;
  request.params = c.params;
  request.params.emplace("seed", "1");
  DatasetShape shape;
  shape.task = c.task;
  shape.num_rows = c.rows;
  shape.num_features = c.features;
  if (c.task != Task::kRegression) {
    shape.num_classes = 2;
    shape.class_values = {0.0, 1.0};
  }
  const absl::StatusOr<TrainingPlan> plan =
      ResolveTrainingPlan(request, shape, nullptr, MethodRegistry::Builtin());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const absl::StatusOr<MemoryEstimate> estimate =
      EstimateTrainingMemory(*plan, MethodRegistry::Builtin());
  ASSERT_TRUE(estimate.ok()) << estimate.status();

  const int64_t before = HeapBytesInUse();
  ResetHeapPeak();
  int64_t kept = 0;
  {
    const Dataset data = MakeData(c.task, c.rows, c.features);
    TrainCallbacks callbacks;
    callbacks.checkpoint_every_steps = 1;
    callbacks.on_checkpoint = [](const Checkpoint& checkpoint) {
      return EncodeCheckpoint(checkpoint).status();
    };
    absl::StatusOr<Snapshot> snapshot =
        Train(*plan, data, nullptr, MethodRegistry::Builtin(), callbacks);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status();
    absl::StatusOr<std::string> bytes = EncodeSnapshot(*snapshot);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    kept = snapshot->posterior->MemoryBytes();
  }
  const int64_t peak = HeapPeakBytes() - before;
  std::printf("%s: estimate %s, measured peak %s (ratio %.2f); %s\n",
              CaseName({GetParam(), 0}).c_str(),
              FormatBytes(estimate->bytes).c_str(), FormatBytes(peak).c_str(),
              static_cast<double>(estimate->bytes) / peak,
              estimate->ToString(8).c_str());
  EXPECT_GE(estimate->bytes, kLow * peak) << estimate->ToString(8);
  EXPECT_LE(estimate->bytes, kHigh * peak) << estimate->ToString(8);
  // The exported posterior's own estimate against its real size.
  EXPECT_GE(estimate->kept_bytes, kLow * kept);
  EXPECT_LE(estimate->kept_bytes, kHigh * kept);
}

std::vector<TrainCase> TrainCases() {
  const Task reg = Task::kRegression, bin = Task::kBinary;
  const ParamMap one_step = {{"steps", "2"}};
  auto with = [&](ParamMap extra) {
    extra.insert(one_step.begin(), one_step.end());
    return extra;
  };
  std::vector<TrainCase> cases;
  for (const char* method :
       {"slang", "slang_online_eig", "bbb", "noisy_adam", "noisy_kfac",
        "nng_blktri", "mc_dropout", "map", "bali_w", "bali_l", "vogn_diag"}) {
    cases.push_back({method, reg, 2000, 8, {256, 256}, with({})});
    cases.push_back({method, reg, 40000, 16, {32}, with({})});
  }
  cases.push_back({"slang",
                   reg,
                   2000,
                   8,
                   {128, 128},
                   with({{"rank", "32"}, {"mc_samples", "16"}})});
  cases.push_back({"slang",
                   reg,
                   2000,
                   8,
                   {256, 256},
                   with({{"eig_solver", "exact"}, {"rank", "8"}})});
  cases.push_back({"slang",
                   reg,
                   2000,
                   8,
                   {256, 256},
                   with({{"precision", "float32"}, {"rank", "16"}})});
  cases.push_back({"nng_full", reg, 2000, 8, {48, 16}, with({})});
  cases.push_back({"vogn_full", reg, 2000, 8, {48, 16}, with({})});
  cases.push_back({"von_full", bin, 4000, 300, {}, with({})});
  cases.push_back({"von_diag", bin, 40000, 50, {}, with({})});
  // Enough iterations to fill L-BFGS's history of lbfgs_memory pairs, which
  // the estimate (and a checkpoint's encoding of it) counts in full.
  cases.push_back({"exact_full",
                   bin,
                   4000,
                   300,
                   {},
                   with({{"lbfgs_memory", "2"}, {"steps", "5"}})});
  cases.push_back({"exact_diag", bin, 40000, 50, {}, with({})});
  cases.push_back({"hmc",
                   reg,
                   2000,
                   8,
                   {64, 64},
                   {{"steps", "30"},
                    {"warmup", "10"},
                    {"leapfrog_steps", "2"},
                    {"chains", "2"}}});
  cases.push_back({"hmc",
                   reg,
                   500,
                   8,
                   {256},
                   {{"steps", "4"},
                    {"warmup", "0"},
                    {"leapfrog_steps", "1"},
                    {"chains", "4"}}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryMethod, TrainingMemoryTest,
                         ::testing::ValuesIn(TrainCases()), CaseName);

std::shared_ptr<const Snapshot> TrainedSnapshot(const std::string& method,
                                                Task task,
                                                std::vector<int> hidden) {
  TrainRequest request;
  request.method = method;
  request.hidden_sizes = std::move(hidden);
  request.params = {{"steps", "2"}, {"seed", "2"}};
  absl::StatusOr<Snapshot> s =
      Train(request, MakeData(task, 500, 8), MethodRegistry::Builtin());
  EXPECT_TRUE(s.ok()) << s.status();
  return std::make_shared<const Snapshot>(*std::move(s));
}

struct PredictCase {
  const char* name;
  const char* method;
  Task task;
  std::vector<int> hidden;
  const char* precision;
  int rows;
  PredictOptions options;
};

TEST(PredictMemoryTest, EstimateIsWithinAFactorOfThePeak) {
  auto opts = [](int s, bool linearized, bool per_sample,
                 std::vector<double> quantiles) {
    PredictOptions o;
    o.num_samples = s;
    o.linearized = linearized;
    o.per_sample = per_sample;
    o.quantiles = std::move(quantiles);
    o.cache_samples = false;
    return o;
  };
  const std::vector<PredictCase> cases = {
      {"slang mc",
       "slang",
       Task::kRegression,
       {512, 512},
       "float64",
       3000,
       opts(64, false, false, {0.1, 0.9})},
      {"slang mc float32",
       "slang",
       Task::kRegression,
       {512, 512},
       "float32",
       3000,
       opts(64, false, false, {})},
      {"slang many samples",
       "slang",
       Task::kRegression,
       {256},
       "float64",
       200,
       opts(2048, false, true, {})},
      {"slang linearised",
       "slang",
       Task::kRegression,
       {256, 256},
       "float64",
       5000,
       opts(1, true, false, {0.5})},
      {"kfac classifier",
       "noisy_kfac",
       Task::kBinary,
       {512, 512},
       "float64",
       3000,
       opts(64, false, false, {})},
      {"dropout per sample",
       "mc_dropout",
       Task::kBinary,
       {256},
       "float64",
       2000,
       opts(32, false, true, {})},
  };
  for (const PredictCase& c : cases) {
    SCOPED_TRACE(c.name);
    PredictorOptions predictor_options;
    predictor_options.precision = c.precision;
    auto predictor = Predictor::Create(
        TrainedSnapshot(c.method, c.task, c.hidden), predictor_options);
    ASSERT_TRUE(predictor.ok()) << predictor.status();
    const MemoryEstimate estimate =
        (*predictor)->EstimateMemory(c.rows, c.options);
    const std::vector<double> rows = MakeData(c.task, c.rows, 8).features;
    const int64_t before = HeapBytesInUse();
    ResetHeapPeak();
    {
      const absl::StatusOr<Prediction> p =
          (*predictor)->Predict(rows, c.rows, c.options);
      ASSERT_TRUE(p.ok()) << p.status();
    }
    const int64_t peak = HeapPeakBytes() - before;
    std::printf("%s: estimate %s, measured peak %s (ratio %.2f); %s\n", c.name,
                FormatBytes(estimate.bytes).c_str(), FormatBytes(peak).c_str(),
                static_cast<double>(estimate.bytes) / peak,
                estimate.ToString(8).c_str());
    EXPECT_GE(estimate.bytes, kLow * peak) << estimate.ToString(8);
    EXPECT_LE(estimate.bytes, kHigh * peak) << estimate.ToString(8);
  }
}

TEST(AcquireMemoryTest, EstimateIsWithinAFactorOfThePeak) {
  auto predictor = Predictor::Create(
      TrainedSnapshot("slang", Task::kRegression, {512, 512}));
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  const Dataset pool_data = MakeData(Task::kRegression, 20000, 8);
  const SpanPool pool(pool_data.features, 8);
  AcquireOptions options;
  options.k = 100;
  options.num_samples = 32;
  options.cache_samples = false;
  const MemoryEstimate estimate =
      EstimateAcquireMemory(**predictor, pool.num_rows(), options);
  const int64_t before = HeapBytesInUse();
  ResetHeapPeak();
  {
    const absl::StatusOr<Acquisition> got = Acquire(**predictor, pool, options);
    ASSERT_TRUE(got.ok()) << got.status();
  }
  const int64_t peak = HeapPeakBytes() - before;
  std::printf("acquire: estimate %s, measured peak %s (ratio %.2f); %s\n",
              FormatBytes(estimate.bytes).c_str(), FormatBytes(peak).c_str(),
              static_cast<double>(estimate.bytes) / peak,
              estimate.ToString(8).c_str());
  EXPECT_GE(estimate.bytes, kLow * peak) << estimate.ToString(8);
  EXPECT_LE(estimate.bytes, kHigh * peak) << estimate.ToString(8);
}

TEST(AcquireMemoryTest, BatchBaldEstimateIsWithinAFactorOfThePeak) {
  auto predictor =
      Predictor::Create(TrainedSnapshot("slang", Task::kBinary, {64}));
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  const Dataset pool_data = MakeData(Task::kBinary, 20000, 8);
  const SpanPool pool(pool_data.features, 8);
  AcquireOptions options;
  options.k = 3;
  options.num_samples = 32;
  options.heuristic = AcquisitionHeuristic::kBatchBald;
  options.cache_samples = false;
  const MemoryEstimate estimate =
      EstimateAcquireMemory(**predictor, pool.num_rows(), options);
  const int64_t before = HeapBytesInUse();
  ResetHeapPeak();
  {
    const absl::StatusOr<Acquisition> got = Acquire(**predictor, pool, options);
    ASSERT_TRUE(got.ok()) << got.status();
  }
  const int64_t peak = HeapPeakBytes() - before;
  std::printf("batchbald: estimate %s, measured peak %s (ratio %.2f); %s\n",
              FormatBytes(estimate.bytes).c_str(), FormatBytes(peak).c_str(),
              static_cast<double>(estimate.bytes) / peak,
              estimate.ToString(8).c_str());
  EXPECT_GE(estimate.bytes, kLow * peak) << estimate.ToString(8);
  EXPECT_LE(estimate.bytes, kHigh * peak) << estimate.ToString(8);
}

TEST(EvaluateMemoryTest, EstimateIsWithinAFactorOfThePeak) {
  struct Case {
    const char* name;
    Task task;
    int rows;
    int ood_rows;
  };
  for (const Case& c :
       {Case{"regression", Task::kRegression, 20000, 0},
        Case{"classifier with OOD rows", Task::kBinary, 20000, 20000}}) {
    SCOPED_TRACE(c.name);
    auto predictor =
        Predictor::Create(TrainedSnapshot("slang", c.task, {256, 256}));
    ASSERT_TRUE(predictor.ok()) << predictor.status();
    const Dataset data = MakeData(c.task, c.rows, 8);
    const Dataset ood = MakeData(c.task, c.ood_rows, 8);
    EvaluateOptions options;
    options.num_samples = 32;
    options.cache_samples = false;
    const MemoryEstimate estimate =
        EstimateEvaluateMemory(**predictor, c.rows, c.ood_rows, options);
    const int64_t before = HeapBytesInUse();
    ResetHeapPeak();
    {
      const absl::StatusOr<Evaluation> got =
          Evaluate(**predictor, data.features, data.targets, c.rows,
                   ood.features, c.ood_rows, options);
      ASSERT_TRUE(got.ok()) << got.status();
    }
    const int64_t peak = HeapPeakBytes() - before;
    std::printf("evaluate %s: estimate %s, measured peak %s (ratio %.2f); %s\n",
                c.name, FormatBytes(estimate.bytes).c_str(),
                FormatBytes(peak).c_str(),
                static_cast<double>(estimate.bytes) / peak,
                estimate.ToString(8).c_str());
    EXPECT_GE(estimate.bytes, kLow * peak) << estimate.ToString(8);
    EXPECT_LE(estimate.bytes, kHigh * peak) << estimate.ToString(8);
  }
}

}  // namespace
}  // namespace bnn
