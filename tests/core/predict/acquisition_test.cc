// Acquisition against brute force on small pools, and bounded memory on a
// generated pool of a million rows.
#include "bnn/predict/acquisition.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <set>
#include <sys/resource.h>
#include <thread>

#include <gtest/gtest.h>

#include "bnn/posterior/low_rank_gaussian.h"

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

std::shared_ptr<Snapshot> MakeSnapshot(Task task, int classes, int inputs) {
  auto s = std::make_shared<Snapshot>();
  s->task = task;
  s->model = ModelSpec::ForTask(task, inputs, classes, {5}, Activation::kTanh);
  const int64_t dim = s->model.NumParameters();
  Rng rng(31);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, 1);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = rng.Normal();
    d[j] = rng.Uniform(1, 3);
    u(j, 0) = rng.Normal();
  }
  s->posterior = *LowRankGaussianPosterior::Create(mean, u, d);
  s->standardization.feature_mean.assign(inputs, 0.0);
  s->standardization.feature_std.assign(inputs, 1.0);
  for (int c = 0; c < (classes > 2 ? classes : 2) && task != Task::kRegression;
       ++c) {
    s->class_values.push_back(c);
  }
  return s;
}

std::vector<double> RandomRows(int n, int p, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> rows(n * p);
  for (double& v : rows) v = 2 * rng.Normal();
  return rows;
}

// The score every heuristic ranks by, from one full-pool prediction.
std::vector<double> BruteForceScores(const Predictor& predictor,
                                     const std::vector<double>& rows, int n,
                                     AcquisitionHeuristic h, int s,
                                     uint64_t seed) {
  PredictOptions o;
  o.num_samples = s;
  o.seed = seed;
  const Prediction p = *predictor.Predict(rows, n, o);
  std::vector<double> scores(n);
  for (int i = 0; i < n; ++i) {
    switch (h) {
      case AcquisitionHeuristic::kMaxVariance:
        scores[i] = p.epistemic_variance[i];
        break;
      case AcquisitionHeuristic::kEntropy:
        scores[i] = p.entropy[i];
        break;
      case AcquisitionHeuristic::kBald:
        scores[i] = p.mutual_information[i];
        break;
      case AcquisitionHeuristic::kMargin: {
        std::vector<double> q(
            p.probabilities.begin() + i * p.num_classes,
            p.probabilities.begin() + (i + 1) * p.num_classes);
        std::sort(q.rbegin(), q.rend());
        scores[i] = 1 - (q[0] - q[1]);
        break;
      }
      case AcquisitionHeuristic::kRandom:
      case AcquisitionHeuristic::kBatchBald:  // a batch, not per-row scores
        break;
    }
  }
  return scores;
}

struct Case {
  Task task;
  int classes;
  AcquisitionHeuristic heuristic;
};

class BruteForceTest : public ::testing::TestWithParam<Case> {};

TEST_P(BruteForceTest, TopKEqualsSortingAllScores) {
  const Case c = GetParam();
  auto predictor = Predictor::Create(MakeSnapshot(c.task, c.classes, 3));
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  const int n = 300;
  const std::vector<double> rows = RandomRows(n, 3, 4);
  const std::vector<double> scores =
      BruteForceScores(**predictor, rows, n, c.heuristic, 24, 9);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });

  AcquireOptions options;
  options.k = 7;
  options.heuristic = c.heuristic;
  options.num_samples = 24;
  options.seed = 9;
  options.chunk_rows = 32;  // several chunks
  SpanPool pool(rows, 3);
  auto got = Acquire(**predictor, pool, options);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->indices.size(), 7u);
  EXPECT_EQ(got->pool_rows, n);
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(got->indices[i], order[i]) << i;
    EXPECT_DOUBLE_EQ(got->scores[i], scores[order[i]]);
  }
  // The chunk size changes nothing.
  options.chunk_rows = 1000;
  auto whole = Acquire(**predictor, pool, options);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->indices, got->indices);
}

INSTANTIATE_TEST_SUITE_P(
    Heuristics, BruteForceTest,
    ::testing::Values(
        Case{Task::kRegression, 0, AcquisitionHeuristic::kMaxVariance},
        Case{Task::kMulticlass, 4, AcquisitionHeuristic::kEntropy},
        Case{Task::kMulticlass, 4, AcquisitionHeuristic::kBald},
        Case{Task::kMulticlass, 4, AcquisitionHeuristic::kMargin},
        Case{Task::kBinary, 2, AcquisitionHeuristic::kBald}));

TEST(AcquireTest, DiversePowerSamplingIsSeededAndSpreadsTheBatch) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 3));
  ASSERT_TRUE(predictor.ok());
  const int n = 400;
  const std::vector<double> rows = RandomRows(n, 3, 5);
  SpanPool pool(rows, 3);
  AcquireOptions options;
  options.k = 20;
  options.num_samples = 16;
  options.seed = 3;
  auto top = Acquire(**predictor, pool, options);
  options.diversity_power = 1.0;
  auto a = Acquire(**predictor, pool, options);
  auto b = Acquire(**predictor, pool, options);
  ASSERT_TRUE(top.ok() && a.ok() && b.ok());
  EXPECT_EQ(a->indices, b->indices);  // same seed, same draw
  EXPECT_EQ(std::set<int64_t>(a->indices.begin(), a->indices.end()).size(),
            20u);
  // Sampling proportional to score^1 reaches beyond the deterministic top 20.
  int outside_top = 0;
  const std::set<int64_t> best(top->indices.begin(), top->indices.end());
  for (int64_t i : a->indices) outside_top += best.count(i) == 0;
  EXPECT_GT(outside_top, 0);
  // A huge power concentrates the draw back on the top of the ranking.
  options.diversity_power = 1e4;
  auto sharp = Acquire(**predictor, pool, options);
  ASSERT_TRUE(sharp.ok());
  EXPECT_EQ(std::set<int64_t>(sharp->indices.begin(), sharp->indices.end()),
            best);
}

TEST(AcquireTest, RandomHeuristicReturnsDistinctSeededRows) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 2));
  const std::vector<double> rows = RandomRows(50, 2, 6);
  SpanPool pool(rows, 2);
  AcquireOptions options;
  options.k = 10;
  options.heuristic = AcquisitionHeuristic::kRandom;
  options.seed = 11;
  auto a = Acquire(**predictor, pool, options);
  options.seed = 12;
  auto b = Acquire(**predictor, pool, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(std::set<int64_t>(a->indices.begin(), a->indices.end()).size(),
            10u);
  EXPECT_NE(a->indices, b->indices);
}

TEST(AcquireTest, RejectsBadRequestsNamingTheProblem) {
  auto regression = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 2));
  auto classifier = Predictor::Create(MakeSnapshot(Task::kMulticlass, 3, 2));
  const std::vector<double> rows = RandomRows(5, 2, 7);
  SpanPool pool(rows, 2);
  AcquireOptions options;
  options.k = 6;
  auto s = Acquire(**regression, pool, options);
  EXPECT_NE(s.status().message().find("k = 6"), absl::string_view::npos);
  options.k = 1;
  options.heuristic = AcquisitionHeuristic::kBald;
  s = Acquire(**regression, pool, options);
  EXPECT_NE(s.status().message().find("bald"), absl::string_view::npos);
  options.heuristic = AcquisitionHeuristic::kMaxVariance;
  s = Acquire(**classifier, pool, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  SpanPool wide(rows, 1);
  options.heuristic = AcquisitionHeuristic::kEntropy;
  s = Acquire(**classifier, wide, options);
  EXPECT_NE(s.status().message().find("features"), absl::string_view::npos);
  EXPECT_EQ(StringToHeuristic("variance").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Rows generated on demand: the pool itself takes no memory.
class GeneratedPool final : public PoolSource {
 public:
  explicit GeneratedPool(int64_t n) : n_(n) {}
  int64_t num_rows() const override { return n_; }
  int64_t num_features() const override { return 2; }
  absl::Status Read(int64_t begin, int64_t count,
                    std::vector<double>* out) const override {
    out->resize(count * 2);
    for (int64_t i = 0; i < count; ++i) {
      const double t = static_cast<double>(begin + i) / n_;
      (*out)[2 * i] = 6 * t - 3;
      (*out)[2 * i + 1] = std::sin(37 * t);
    }
    return absl::OkStatus();
  }

 private:
  int64_t n_;
};

long PeakRssKb() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(AcquireTest, AMillionRowPoolIsScoredInBoundedMemory) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 2));
  ASSERT_TRUE(predictor.ok());
  GeneratedPool pool(1000000);
  AcquireOptions options;
  options.k = 5;
  options.num_samples = 16;
  BNN_SKIP_IF_SANITIZED(
      "ASan keeps freed memory in quarantine: RSS is not the program's");
  const long before = PeakRssKb();
  auto got = Acquire(**predictor, pool, options);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->pool_rows, 1000000);
  // All 1e6 x 16 outputs would be 128 MB; streaming needs a few chunks.
  EXPECT_LT(PeakRssKb() - before, 32 * 1024) << "peak RSS grew too much";
}

// Issue 10, finding 5: cancelling an acquisition over a large pool returns
// promptly (the pool is checked chunk by chunk) with the interrupt's status.
TEST(AcquireTest, CancelledAcquisitionOverALargePoolReturnsPromptly) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 2));
  ASSERT_TRUE(predictor.ok());
  GeneratedPool pool(100000000);  // ~10 minutes to score in full
  std::atomic<bool> cancel{false};
  AcquireOptions options;
  options.num_samples = 64;
  options.interrupt = Interrupt::OnFlag(&cancel, "acquisition");
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  const auto got = Acquire(**predictor, pool, options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  canceller.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
  EXPECT_NE(got.status().message().find("of 100000000"),
            absl::string_view::npos)
      << got.status();
  // 200 ms until the flag, then at most one chunk (4096 rows x 64 samples,
  // milliseconds) before the check sees it.
  EXPECT_LT(seconds, 2.0);
}

namespace batchbald {

// p_s(c | x_i), point-major [(i * S + s) * C + c], random and normalised.
std::vector<double> RandomProbs(int n, int s_count, int classes,
                                uint64_t seed) {
  Rng rng(seed);
  std::vector<double> probs(n * s_count * classes);
  for (int i = 0; i < n * s_count; ++i) {
    double sum = 0;
    for (int c = 0; c < classes; ++c) {
      // Peaked and spread rows alike: exponentials of scaled normals.
      const double v = std::exp(2.5 * rng.Normal());
      probs[i * classes + c] = v;
      sum += v;
    }
    for (int c = 0; c < classes; ++c) probs[i * classes + c] /= sum;
  }
  return probs;
}

// The batch's mutual information by brute force: the joint over the
// rows of `batch` enumerated configuration by configuration (C^m of them),
// p(y) = (1/S) sum_s prod_j p_s(y_j), and E_s H[p_s(y_j)] per row.
double BruteForceMutualInformation(const std::vector<double>& probs,
                                   int s_count, int classes,
                                   const std::vector<int64_t>& batch) {
  const int m = static_cast<int>(batch.size());
  int64_t configs = 1;
  for (int j = 0; j < m; ++j) configs *= classes;
  double joint_entropy = 0;
  std::vector<int> y(m);
  for (int64_t config = 0; config < configs; ++config) {
    int64_t rest = config;
    for (int j = m - 1; j >= 0; --j) {
      y[j] = static_cast<int>(rest % classes);
      rest /= classes;
    }
    double p = 0;
    for (int s = 0; s < s_count; ++s) {
      double prod = 1;
      for (int j = 0; j < m; ++j) {
        prod *= probs[(batch[j] * s_count + s) * classes + y[j]];
      }
      p += prod;
    }
    p /= s_count;
    if (p > 0) joint_entropy -= p * std::log(p);
  }
  double conditional = 0;
  for (int64_t i : batch) {
    for (int s = 0; s < s_count; ++s) {
      for (int c = 0; c < classes; ++c) {
        const double q = probs[(i * s_count + s) * classes + c];
        if (q > 0) conditional -= q * std::log(q) / s_count;
      }
    }
  }
  return joint_entropy - conditional;
}

TEST(GreedyBatchBaldTest, EqualsBruteForceGreedyAndNearsTheBestSubset) {
  const int n = 8, s_count = 6, classes = 3, k = 3;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    const std::vector<double> probs = RandomProbs(n, s_count, classes, seed);
    auto got = GreedyBatchBald(probs, n, s_count, classes, k);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->indices.size(), 3u);
    // Brute-force greedy: every step scores every remaining row by the
    // enumerated joint.
    std::vector<int64_t> batch;
    for (int m = 0; m < k; ++m) {
      int64_t best = -1;
      double best_score = -1e300;
      for (int64_t i = 0; i < n; ++i) {
        if (std::find(batch.begin(), batch.end(), i) != batch.end()) continue;
        std::vector<int64_t> with = batch;
        with.push_back(i);
        const double score =
            BruteForceMutualInformation(probs, s_count, classes, with);
        if (score > best_score) {
          best_score = score;
          best = i;
        }
      }
      batch.push_back(best);
      EXPECT_EQ(got->indices[m], best) << "seed " << seed << " step " << m;
      EXPECT_NEAR(got->scores[m], best_score, 1e-12);
    }
    // Over all C(8, 3) = 56 subsets: the greedy batch is within the
    // (1 - 1/e) bound of submodular maximisation (Kirsch et al. 2019,
    // Thm. 1), and no subset beats the best one found here.
    double best_subset = -1e300;
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = a + 1; b < n; ++b) {
        for (int64_t c = b + 1; c < n; ++c) {
          best_subset = std::max(
              best_subset,
              BruteForceMutualInformation(probs, s_count, classes, {a, b, c}));
        }
      }
    }
    EXPECT_LE(got->scores.back(), best_subset + 1e-12);
    EXPECT_GE(got->scores.back(), (1 - 1 / std::exp(1.0)) * best_subset);
  }
}

TEST(GreedyBatchBaldTest, RefusesAJointTableOverTheLimit) {
  const std::vector<double> probs = RandomProbs(40, 64, 10, 3);
  auto got = GreedyBatchBald(probs, 40, 64, 10, 9);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find("k = 9"), absl::string_view::npos)
      << got.status();
  EXPECT_NE(got.status().message().find("10 classes"), absl::string_view::npos);
}

TEST(AcquireBatchBaldTest, BatchOfOneIsBaldAndLargerBatchesMatchTheCore) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kMulticlass, 4, 3));
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  const int n = 60;
  const std::vector<double> rows = RandomRows(n, 3, 12);
  SpanPool pool(rows, 3);
  AcquireOptions options;
  options.k = 1;
  options.num_samples = 16;
  options.seed = 5;
  options.chunk_rows = 16;  // several chunks
  options.heuristic = AcquisitionHeuristic::kBald;
  auto bald = Acquire(**predictor, pool, options);
  ASSERT_TRUE(bald.ok()) << bald.status();
  options.heuristic = AcquisitionHeuristic::kBatchBald;
  auto batch = Acquire(**predictor, pool, options);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->indices.size(), 1u);
  EXPECT_EQ(batch->indices[0], bald->indices[0]);
  EXPECT_NEAR(batch->scores[0], bald->scores[0], 1e-12);

  // A batch of 3 is GreedyBatchBald over the pool's per-sample
  // probabilities, whatever the chunk size.
  options.k = 3;
  batch = Acquire(**predictor, pool, options);
  ASSERT_TRUE(batch.ok()) << batch.status();
  PredictOptions predict;
  predict.num_samples = 16;
  predict.seed = 5;
  predict.per_sample = true;
  const Prediction p = *(*predictor)->Predict(rows, n, predict);
  std::vector<double> probs(n * 16 * 4);
  for (int s = 0; s < 16; ++s) {
    for (int i = 0; i < n; ++i) {
      for (int c = 0; c < 4; ++c) {
        probs[(i * 16 + s) * 4 + c] = p.sample_outputs[(s * n + i) * 4 + c];
      }
    }
  }
  auto direct = GreedyBatchBald(probs, n, 16, 4, 3);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(batch->indices, direct->indices);
  EXPECT_EQ(batch->scores, direct->scores);
  EXPECT_EQ(
      std::set<int64_t>(batch->indices.begin(), batch->indices.end()).size(),
      3u);
  // The batch's mutual information grows with every row.
  EXPECT_LT(batch->scores[0], batch->scores[2]);
}

TEST(AcquireBatchBaldTest, RefusesRegressionAndDiversityNamingThem) {
  auto regression = Predictor::Create(MakeSnapshot(Task::kRegression, 0, 2));
  auto classifier = Predictor::Create(MakeSnapshot(Task::kBinary, 2, 2));
  const std::vector<double> rows = RandomRows(5, 2, 7);
  SpanPool pool(rows, 2);
  AcquireOptions options;
  options.heuristic = AcquisitionHeuristic::kBatchBald;
  auto s = Acquire(**regression, pool, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("batchbald"), absl::string_view::npos);
  EXPECT_NE(s.status().message().find("regression"), absl::string_view::npos);
  options.diversity_power = 1;
  s = Acquire(**classifier, pool, options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("diversity_power"),
            absl::string_view::npos);
  EXPECT_EQ(*StringToHeuristic("batchbald"), AcquisitionHeuristic::kBatchBald);
}

TEST(AcquireBatchBaldTest, MemoryEstimateCountsThePoolsSamples) {
  auto classifier = Predictor::Create(MakeSnapshot(Task::kMulticlass, 4, 3));
  AcquireOptions options;
  options.k = 2;
  options.num_samples = 32;
  options.heuristic = AcquisitionHeuristic::kBald;
  const int64_t bald =
      EstimateAcquireMemory(**classifier, 10000, options).bytes;
  options.heuristic = AcquisitionHeuristic::kBatchBald;
  const int64_t batch =
      EstimateAcquireMemory(**classifier, 10000, options).bytes;
  EXPECT_GE(batch - bald, int64_t{10000} * 32 * 4 * 8);
}

}  // namespace batchbald

}  // namespace
}  // namespace bnn
