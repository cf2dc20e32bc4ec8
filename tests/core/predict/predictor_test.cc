// The Monte Carlo predictive against a hand-rolled computation from the same
// posterior samples.
#include "bnn/predict/predictor.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/posterior/gaussian_families.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/posterior/sample_families.h"
#include "bnn/predict/acquisition.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

std::shared_ptr<Snapshot> MakeSnapshot(Task task, int classes,
                                       int hidden_width = 4) {
  auto s = std::make_shared<Snapshot>();
  s->task = task;
  s->model =
      ModelSpec::ForTask(task, 2, classes, {hidden_width}, Activation::kTanh);
  const int64_t dim = s->model.NumParameters();
  Rng rng(99);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, 2);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = rng.Normal();
    d[j] = rng.Uniform(2, 5);
    u(j, 0) = 0.5 * rng.Normal();
    u(j, 1) = 0.5 * rng.Normal();
  }
  s->posterior = *LowRankGaussianPosterior::Create(mean, u, d);
  s->standardization.feature_mean = {1.0, -2.0};
  s->standardization.feature_std = {2.0, 0.5};
  if (task == Task::kRegression) {
    s->standardization.target_mean = 10;
    s->standardization.target_std = 3;
    s->noise_precision = 4;
  } else {
    for (int c = 0; c < (classes > 2 ? classes : 2); ++c) {
      s->class_values.push_back(10.0 * c - 1);
    }
  }
  return s;
}

const std::vector<double> kRows = {0.5, -1.0, 3.0, -2.5, -1.0, 0.0};

TEST(PredictorTest, RegressionMatchesHandComputedMoments) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  auto predictor = Predictor::Create(snapshot);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 7;
  options.seed = 123;
  auto p = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(p.ok()) << p.status();

  // Same draws by hand: the seed's posterior samples -> standardised rows.
  const Eigen::MatrixXd theta = snapshot->posterior->Draw(options.seed, 7);
  const Network<double> net(snapshot->model);
  for (int i = 0; i < 3; ++i) {
    Eigen::MatrixXd x(1, 2);
    x << (kRows[2 * i] - 1.0) / 2.0, (kRows[2 * i + 1] + 2.0) / 0.5;
    ForwardPass<double> pass;
    net.Forward(x, theta, &pass);
    const Eigen::VectorXd f =
        pass.output().col(0) * 3.0 + Eigen::VectorXd::Constant(7, 10.0);
    const double mean = f.mean();
    const double epistemic = (f.array() - mean).square().mean();
    EXPECT_NEAR(p->mean[i], mean, 1e-12);
    EXPECT_NEAR(p->epistemic_variance[i], epistemic, 1e-10);
    EXPECT_DOUBLE_EQ(p->aleatoric_variance[i], 9.0 / 4.0);
    EXPECT_DOUBLE_EQ(p->variance[i], p->epistemic_variance[i] + 9.0 / 4.0);
  }
}

TEST(PredictorTest, SameSeedIsBitwiseIdenticalOtherSeedDiffers) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0));
  ASSERT_TRUE(predictor.ok());
  PredictOptions options;
  options.num_samples = 16;
  options.seed = 5;
  auto a = (*predictor)->Predict(kRows, 3, options);
  auto b = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->mean, b->mean);
  EXPECT_EQ(a->variance, b->variance);
  options.seed = 6;
  auto c = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->mean, c->mean);
}

TEST(PredictorTest, ChunkingDoesNotChangeResults) {
  // Over 3 rows, chunk_rows = 1 makes three passes; chunk_rows = 2 makes
  // passes of 2 rows, the last one padded with a zero row whose outputs must
  // be ignored. Both output kinds.
  for (const int chunk_rows : {1, 2}) {
    for (const auto& [task, classes] :
         {std::pair{Task::kRegression, 0}, std::pair{Task::kMulticlass, 3}}) {
      auto snapshot = MakeSnapshot(task, classes);
      PredictorOptions chunked_options;
      chunked_options.chunk_rows = chunk_rows;
      auto chunked = Predictor::Create(snapshot, chunked_options);
      auto whole = Predictor::Create(snapshot);
      ASSERT_TRUE(chunked.ok() && whole.ok());
      PredictOptions options;
      options.num_samples = 9;
      auto a = (*chunked)->Predict(kRows, 3, options);
      auto b = (*whole)->Predict(kRows, 3, options);
      ASSERT_TRUE(a.ok() && b.ok());
      if (classes == 0) {
        for (int i = 0; i < 3; ++i) {
          EXPECT_NEAR(a->mean[i], b->mean[i], 1e-12);
          EXPECT_NEAR(a->variance[i], b->variance[i], 1e-10);
        }
      } else {
        ASSERT_EQ(a->probabilities.size(), b->probabilities.size());
        for (size_t k = 0; k < a->probabilities.size(); ++k) {
          EXPECT_NEAR(a->probabilities[k], b->probabilities[k], 1e-12);
        }
        for (int i = 0; i < 3; ++i) {
          EXPECT_NEAR(a->mutual_information[i], b->mutual_information[i],
                      1e-12);
        }
      }
    }
  }
}

// Predict is thread-safe: concurrent uncached requests with different sample
// counts give exactly what each gives alone. (The low-rank posterior's
// sampler shared a scratch matrix, found by bench/load.)
TEST(PredictorTest, ConcurrentRequestsGiveTheirSerialResults) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0));
  ASSERT_TRUE(predictor.ok());
  const std::vector<int> sample_counts = {1, 40, 7, 120};
  std::vector<Prediction> alone;
  for (const int s : sample_counts) {
    PredictOptions options;
    options.num_samples = s;
    options.seed = s;
    options.cache_samples = false;
    auto p = (*predictor)->Predict(kRows, 3, options);
    ASSERT_TRUE(p.ok());
    alone.push_back(*std::move(p));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 1000; ++k) {
        const size_t i = (t + k) % sample_counts.size();
        PredictOptions options;
        options.num_samples = sample_counts[i];
        options.seed = sample_counts[i];
        options.cache_samples = false;
        auto p = (*predictor)->Predict(kRows, 3, options);
        if (!p.ok() || p->mean != alone[i].mean ||
            p->variance != alone[i].variance) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong, 0);
}

TEST(PredictorTest, MulticlassProbabilitiesAndEntropy) {
  auto snapshot = MakeSnapshot(Task::kMulticlass, 3);
  auto predictor = Predictor::Create(snapshot);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 5;
  auto p = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->num_classes, 3);
  for (int i = 0; i < 3; ++i) {
    double sum = 0, entropy = 0, best = -1;
    int arg = 0;
    for (int c = 0; c < 3; ++c) {
      const double q = p->probabilities[3 * i + c];
      sum += q;
      entropy -= q * std::log(q);
      if (q > best) best = q, arg = c;
    }
    EXPECT_NEAR(sum, 1.0, 1e-12);
    EXPECT_NEAR(p->entropy[i], entropy, 1e-12);
    EXPECT_EQ(p->predicted_class[i], snapshot->class_values[arg]);
  }
}

TEST(PredictorTest, BinaryAveragesSigmoidsNotLogits) {
  auto snapshot = MakeSnapshot(Task::kBinary, 2);
  auto predictor = Predictor::Create(snapshot);
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 6;
  options.seed = 2;
  auto p = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(p.ok());
  const Eigen::MatrixXd theta = snapshot->posterior->Draw(2, 6);
  const Network<double> net(snapshot->model);
  Eigen::MatrixXd x(1, 2);
  x << (kRows[0] - 1.0) / 2.0, (kRows[1] + 2.0) / 0.5;
  ForwardPass<double> pass;
  net.Forward(x, theta, &pass);
  double p1 = 0;
  for (int s = 0; s < 6; ++s) p1 += Sigmoid(pass.output()(s, 0)) / 6;
  EXPECT_NEAR(p->probabilities[1], p1, 1e-12);
  EXPECT_NEAR(p->probabilities[0], 1 - p1, 1e-12);
}

TEST(PredictorTest, RejectsBadRequests) {
  PredictorOptions limits;
  limits.max_samples = 32;
  auto predictor =
      Predictor::Create(MakeSnapshot(Task::kRegression, 0), limits);
  ASSERT_TRUE(predictor.ok());
  PredictOptions options;
  options.num_samples = 33;
  auto too_many = (*predictor)->Predict(kRows, 3, options);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("num_samples = 33"),
            absl::string_view::npos);
  options.num_samples = 0;
  EXPECT_EQ((*predictor)->Predict(kRows, 3, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.num_samples = 4;
  auto ragged = (*predictor)->Predict(kRows, 2, options);
  EXPECT_EQ(ragged.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<double> nan_rows = kRows;
  nan_rows[3] = std::nan("");
  auto nan = (*predictor)->Predict(nan_rows, 3, options);
  EXPECT_EQ(nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nan.status().message().find("row 1, feature 1"),
            absl::string_view::npos)
      << nan.status();
}

}  // namespace
}  // namespace bnn

namespace bnn {
namespace {

// A 1-input logistic regression whose posterior is two explicit samples, so
// the predictive is a hand-computable average of two sigmoids.
std::shared_ptr<Snapshot> TwoSampleClassifier() {
  auto s = std::make_shared<Snapshot>();
  s->task = Task::kBinary;
  s->model = ModelSpec::ForTask(Task::kBinary, 1, 2, {}, Activation::kRelu);
  s->class_values = {-1, 1};
  Eigen::MatrixXd samples(2, 2);  // theta = [w, b] per column
  samples << 2.0, -1.0,           //
      0.0, 0.5;
  s->posterior = *SampleSetPosterior::Create(samples);
  s->standardization.feature_mean = {0.0};
  s->standardization.feature_std = {1.0};
  return s;
}

double H(double p) { return -(p * std::log(p) + (1 - p) * std::log(1 - p)); }

TEST(PredictorTest, EntropyBaldAndVariationRatioMatchHandComputedValues) {
  auto predictor = Predictor::Create(TwoSampleClassifier());
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 2;  // == stored samples: both, in order
  options.per_sample = true;
  const std::vector<double> x = {1.0, -3.0};
  auto p = (*predictor)->Predict(x, 2, options);
  ASSERT_TRUE(p.ok()) << p.status();
  for (int i = 0; i < 2; ++i) {
    const double p1 = 1 / (1 + std::exp(-(2.0 * x[i] + 0.0)));
    const double p2 = 1 / (1 + std::exp(-(-1.0 * x[i] + 0.5)));
    const double mean = (p1 + p2) / 2;
    EXPECT_NEAR(p->probabilities[2 * i + 1], mean, 1e-12);
    EXPECT_NEAR(p->entropy[i], H(mean), 1e-12);
    EXPECT_NEAR(p->expected_entropy[i], (H(p1) + H(p2)) / 2, 1e-12);
    EXPECT_NEAR(p->mutual_information[i], H(mean) - (H(p1) + H(p2)) / 2, 1e-12);
    // The samples disagree on the class at both points: one vote each.
    EXPECT_EQ((p1 > 0.5), !(p2 > 0.5));
    EXPECT_DOUBLE_EQ(p->variation_ratio[i], 0.5);
    EXPECT_NEAR(p->sample_outputs[(0 * 2 + i) * 2 + 1], p1, 1e-12);
    EXPECT_NEAR(p->sample_outputs[(1 * 2 + i) * 2 + 1], p2, 1e-12);
    EXPECT_EQ(p->predicted_class[i], mean > 0.5 ? 1 : -1);
  }
}

// Regression with explicit per-sample means f_s(x) = w_s x + b_s.
std::shared_ptr<Snapshot> ThreeSampleRegression() {
  auto s = std::make_shared<Snapshot>();
  s->task = Task::kRegression;
  s->model = ModelSpec::ForTask(Task::kRegression, 1, 0, {}, Activation::kRelu);
  Eigen::MatrixXd samples(2, 3);
  samples << 1.0, 2.0, -1.0,  //
      0.0, 1.0, 0.5;
  s->posterior = *SampleSetPosterior::Create(samples);
  s->standardization.feature_mean = {0.0};
  s->standardization.feature_std = {1.0};
  s->standardization.target_mean = 1.0;
  s->standardization.target_std = 2.0;
  s->noise_precision = 4.0;  // aleatoric sd 2 / 2 = 1 in original units
  return s;
}

TEST(PredictorTest, QuantilesOfTheMixtureMatchBruteForce) {
  auto predictor = Predictor::Create(ThreeSampleRegression());
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 3;
  options.quantiles = {0.05, 0.5, 0.9};
  const std::vector<double> x = {0.7};
  auto p = (*predictor)->Predict(x, 1, options);
  ASSERT_TRUE(p.ok()) << p.status();
  const double f[3] = {1 + 2 * (1.0 * 0.7 + 0.0), 1 + 2 * (2.0 * 0.7 + 1.0),
                       1 + 2 * (-1.0 * 0.7 + 0.5)};
  EXPECT_NEAR(p->mean[0], (f[0] + f[1] + f[2]) / 3, 1e-12);
  EXPECT_NEAR(p->aleatoric_variance[0], 1.0, 1e-12);
  // Mixture CDF by a fine grid: the first grid point whose CDF reaches q.
  for (size_t k = 0; k < options.quantiles.size(); ++k) {
    double y = -20;
    for (; y < 30; y += 1e-4) {
      double cdf = 0;
      for (double m : f) cdf += 0.5 * std::erfc(-(y - m) / std::sqrt(2.0)) / 3;
      if (cdf >= options.quantiles[k]) break;
    }
    EXPECT_NEAR(p->quantiles[k], y, 2e-4) << options.quantiles[k];
  }
}

// y = offset + x: the standardised targets are the same for every offset, so
// the trained models and their predictions minus the offset agree up to the
// rounding of y. In original units the quantile bisection never ended for
// offsets >= ~1e7 (no representable midpoint within its relative tolerance).
TEST(PredictorTest, LargeTargetOffsetsGiveTheSamePredictionsShifted) {
  struct Result {
    Prediction mc, linearized;
    Acquisition acquired;
  };
  std::vector<double> x;
  for (int i = 0; i < 40; ++i) x.push_back(-2.0 + 0.1 * i);
  const std::vector<double> grid = {-3.0, -1.0, 0.0, 1.5, 4.0};
  auto run = [&](double offset) -> absl::StatusOr<Result> {
    Dataset data;
    data.num_features = 1;
    data.features = x;
    for (double v : x) data.targets.push_back(offset + v);
    TrainRequest request;
    request.method = "slang";
    request.hidden_sizes = {8};
    request.params = {{"epochs", "20"}, {"seed", "3"}, {"batch_size", "10"}};
    BNN_ASSIGN_OR_RETURN(Snapshot snapshot,
                         Train(request, data, MethodRegistry::Builtin()));
    BNN_ASSIGN_OR_RETURN(std::unique_ptr<Predictor> predictor,
                         Predictor::Create(std::make_shared<const Snapshot>(
                             std::move(snapshot))));
    Result result;
    PredictOptions options;
    options.num_samples = 32;
    options.seed = 9;
    options.quantiles = {0.05, 0.5, 0.95};
    BNN_ASSIGN_OR_RETURN(result.mc, predictor->Predict(grid, 5, options));
    options.linearized = true;
    BNN_ASSIGN_OR_RETURN(result.linearized,
                         predictor->Predict(grid, 5, options));
    AcquireOptions acquire;
    acquire.k = 2;
    acquire.num_samples = 32;
    acquire.chunk_rows = 2;
    BNN_ASSIGN_OR_RETURN(result.acquired,
                         Acquire(*predictor, SpanPool(grid, 1), acquire));
    return result;
  };
  const absl::StatusOr<Result> base = run(0.0);
  ASSERT_TRUE(base.ok()) << base.status();
  for (const double offset : {1e3, 1e6, 1e9, 1e12}) {
    SCOPED_TRACE(offset);
    const absl::StatusOr<Result> shifted = run(offset);
    ASSERT_TRUE(shifted.ok()) << shifted.status();
    // The rounding of offset + x (ulp(1e12) ~ 1e-4) perturbs training.
    const double tol = 1e-3 + 1e-15 * offset;
    for (const auto& [got, want] :
         {std::pair{&shifted->mc, &base->mc},
          std::pair{&shifted->linearized, &base->linearized}}) {
      for (int i = 0; i < 5; ++i) {
        EXPECT_NEAR(got->mean[i] - offset, want->mean[i], tol) << i;
        EXPECT_NEAR(got->epistemic_variance[i], want->epistemic_variance[i],
                    tol * (1 + want->epistemic_variance[i]))
            << i;
        for (int q = 0; q < 3; ++q) {
          EXPECT_NEAR(got->quantiles[3 * i + q] - offset,
                      want->quantiles[3 * i + q], tol)
              << i << " " << q;
        }
        EXPECT_LT(got->quantiles[3 * i], got->quantiles[3 * i + 1]);
        EXPECT_LT(got->quantiles[3 * i + 1], got->quantiles[3 * i + 2]);
      }
    }
    EXPECT_EQ(shifted->acquired.indices, base->acquired.indices);
  }
}

// Issue 10, finding 9: a NaN or Inf output is an Internal error naming the
// snapshot, never an answer. Here the variance overflows when mapped back to
// original units through a huge (but finite) target std.
TEST(PredictorTest, NonFiniteOutputIsAnInternalErrorNamingTheSnapshot) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  snapshot->standardization.target_std = 1e200;
  auto predictor = Predictor::Create(snapshot, {}, "snap-huge");
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  PredictOptions options;
  options.num_samples = 8;
  const auto p = (*predictor)->Predict(kRows, 3, options);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInternal) << p.status();
  EXPECT_NE(p.status().message().find("snapshot 'snap-huge'"),
            absl::string_view::npos)
      << p.status();
  EXPECT_NE(p.status().message().find("variance = inf for row 0"),
            absl::string_view::npos)
      << p.status();
}

// An input that the snapshot's standardisation maps outside the double range
// is the request's fault: InvalidArgument naming the row and feature.
TEST(PredictorTest, InputThatOverflowsStandardisationIsInvalid) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  snapshot->standardization.feature_std = {1e-300, 0.5};
  auto predictor = Predictor::Create(snapshot);
  ASSERT_TRUE(predictor.ok());
  const std::vector<double> rows = {0.5, 0.0, 1e10, 1.0};
  const auto p = (*predictor)->Predict(rows, 2, PredictOptions());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("row 1, feature 0 = 1e+10"),
            absl::string_view::npos)
      << p.status();
}

// Issue 10, finding 10: requests whose seed the client did not choose are
// not cached, so a stream of them cannot evict reusable draws; a cached draw
// still serves them.
TEST(PredictorTest, UncachedRequestsLeaveTheCacheAlone) {
  auto predictor = Predictor::Create(MakeSnapshot(Task::kRegression, 0));
  ASSERT_TRUE(predictor.ok());
  PredictOptions options;
  options.num_samples = 8;
  options.seed = 1;
  ASSERT_TRUE((*predictor)->Predict(kRows, 3, options).ok());
  EXPECT_EQ((*predictor)->cache_stats().entries, 1);
  options.cache_samples = false;
  for (uint64_t seed = 100; seed < 110; ++seed) {
    options.seed = seed;
    ASSERT_TRUE((*predictor)->Predict(kRows, 3, options).ok());
  }
  auto stats = (*predictor)->cache_stats();
  EXPECT_EQ(stats.entries, 1);
  EXPECT_EQ(stats.misses, 11);
  options.seed = 1;  // the cached draw serves an uncached request
  ASSERT_TRUE((*predictor)->Predict(kRows, 3, options).ok());
  EXPECT_EQ((*predictor)->cache_stats().hits, 1);
}

// DrawSamples: one draw reused by later calls gives the same numbers as
// drawing in each call; a handle for other options is refused.
TEST(PredictorTest, DrawnSamplesAreReusedAndChecked) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  PredictorOptions no_cache;
  no_cache.cache_bytes = 0;
  auto predictor = Predictor::Create(snapshot, no_cache);
  auto other = Predictor::Create(snapshot, no_cache);
  ASSERT_TRUE(predictor.ok() && other.ok());
  PredictOptions options;
  options.num_samples = 8;
  options.seed = 4;
  const auto direct = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(direct.ok());
  auto samples = (*predictor)->DrawSamples(options);
  ASSERT_TRUE(samples.ok()) << samples.status();
  options.samples = *samples;
  const auto reused = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_EQ(reused->mean, direct->mean);
  EXPECT_EQ(reused->variance, direct->variance);
  EXPECT_EQ((*predictor)->cache_stats().misses, 2);  // direct + DrawSamples

  options.seed = 5;
  EXPECT_EQ((*predictor)->Predict(kRows, 3, options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.seed = 4;
  EXPECT_EQ((*other)->Predict(kRows, 3, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Issue 10, finding 5: the interrupt is checked between chunks; its status
// ends the call, saying how far it got.
TEST(PredictorTest, InterruptStopsBetweenChunks) {
  PredictorOptions small_chunks;
  small_chunks.chunk_rows = 1;
  auto predictor =
      Predictor::Create(MakeSnapshot(Task::kRegression, 0), small_chunks);
  ASSERT_TRUE(predictor.ok());
  for (const bool linearized : {false, true}) {
    int checks = 0;
    PredictOptions options;
    options.linearized = linearized;
    // Each check follows a progress report of the rows done (a server
    // learns the rate of a call stopped before it finishes from them).
    std::vector<std::pair<int64_t, int64_t>> reports;
    options.interrupt =
        Interrupt([&checks] {
          return ++checks > 2 ? absl::DeadlineExceededError("deadline passed")
                              : absl::OkStatus();
        }).WithProgress([&reports, &checks](int64_t done, int64_t total) {
          EXPECT_EQ(static_cast<int64_t>(reports.size()), checks);
          reports.emplace_back(done, total);
        });
    const auto p = (*predictor)->Predict(kRows, 3, options);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(p.status().message().find("stopped after 2 of 3 rows"),
              absl::string_view::npos)
        << p.status();
    EXPECT_EQ(reports, (std::vector<std::pair<int64_t, int64_t>>{
                           {0, 3}, {1, 3}, {2, 3}}));
  }
}

// Many weight samples of a large posterior are drawn in groups of tiles with
// an interrupt check between them (drawing was the longest uninterrupted
// unit of a Predict, docs/results/load.md): D = 20001 and 64 samples are
// 1.3M values, two groups (Posterior::kSampleGroupValues).
TEST(PredictorTest, InterruptStopsBetweenBlocksOfWeightSamples) {
  auto predictor = Predictor::Create(
      MakeSnapshot(Task::kRegression, 0, /*hidden_width=*/5000), {});
  ASSERT_TRUE(predictor.ok());
  int checks = 0;
  PredictOptions options;
  options.num_samples = 64;
  options.interrupt = Interrupt([&checks] {
    ++checks;
    return absl::CancelledError("call cancelled");
  });
  const auto p = (*predictor)->Predict(kRows, 3, options);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(checks, 1);
  EXPECT_NE(p.status().message().find(
                "call cancelled: stopped drawing 64 weight samples"),
            absl::string_view::npos)
      << p.status();
  // Uninterrupted, the same request is served (that blocks equal one draw
  // is the families' contract, tests/core/posterior/families_test.cc).
  options.interrupt = Interrupt();
  const auto full = (*predictor)->Predict(kRows, 3, options);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->mean.size(), 3u);
}

// Issue 15: draws that are not cached reuse the buffer of an earlier draw of
// the same shape (PredictorOptions::reuse_bytes) instead of allocating one
// per request, and give the same answers as fresh buffers, in both
// precisions.
TEST(PredictorTest, UncachedDrawsReuseIdleBuffers) {
  for (const std::string precision : {"float64", "float32"}) {
    PredictorOptions reuse, fresh;
    reuse.precision = fresh.precision = precision;
    fresh.reuse_bytes = 0;
    auto a = Predictor::Create(MakeSnapshot(Task::kRegression, 0), reuse);
    auto b = Predictor::Create(MakeSnapshot(Task::kRegression, 0), fresh);
    ASSERT_TRUE(a.ok() && b.ok());
    PredictOptions options;
    options.num_samples = 9;
    options.cache_samples = false;
    for (const uint64_t seed : {1, 2, 3}) {
      options.seed = seed;
      const auto pa = (*a)->Predict(kRows, 3, options);
      const auto pb = (*b)->Predict(kRows, 3, options);
      ASSERT_TRUE(pa.ok() && pb.ok());
      EXPECT_EQ(pa->mean, pb->mean) << precision << " seed " << seed;
      EXPECT_EQ(pa->variance, pb->variance) << precision << " seed " << seed;
    }
    EXPECT_EQ((*a)->cache_stats().reused, 2) << precision;
    EXPECT_EQ((*b)->cache_stats().reused, 0) << precision;
    EXPECT_EQ((*a)->cache_stats().entries, 0) << precision;
    // Another shape draws into a new buffer.
    options.num_samples = 10;
    ASSERT_TRUE((*a)->Predict(kRows, 3, options).ok());
    EXPECT_EQ((*a)->cache_stats().reused, 2) << precision;
  }
}

// Issue 10, finding 2: an allocation failure inside Predict fails that
// request with ResourceExhausted instead of aborting the process: 4096
// samples of a million-parameter model (a 32 GB block) in a child capped
// 256 MiB above its size.
TEST(PredictorDeathTest, AllocationFailureIsResourceExhausted) {
  BNN_SKIP_IF_SANITIZED("ASan cannot run under RLIMIT_AS");
  auto s = std::make_shared<Snapshot>();
  s->model = ModelSpec::ForTask(Task::kRegression, 2, 0, {1000, 1000},
                                Activation::kTanh);
  const int64_t dim = s->model.NumParameters();
  s->posterior = *DiagonalGaussianPosterior::Create(Eigen::VectorXd::Zero(dim),
                                                    Eigen::VectorXd::Ones(dim));
  s->standardization.feature_mean = {0, 0};
  s->standardization.feature_std = {1, 1};
  auto predictor = Predictor::Create(s, {}, "snap-big");
  ASSERT_TRUE(predictor.ok()) << predictor.status();
  EXPECT_EXIT(
      {
        if (!bnn::testing::LimitAddressSpace(int64_t{256} << 20)) _exit(2);
        PredictOptions options;
        options.num_samples = 4096;
        const auto p = (*predictor)->Predict(kRows, 3, options);
        std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
        _exit(p.status().code() == absl::StatusCode::kResourceExhausted ? 0
                                                                        : 1);
      },
      ::testing::ExitedWithCode(0), "snapshot 'snap-big'");
}

TEST(PredictorTest, CachedSamplesServeLaterRequestsWithoutResampling) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  auto cached = Predictor::Create(snapshot);
  PredictorOptions no_cache;
  no_cache.cache_bytes = 0;
  auto uncached = Predictor::Create(snapshot, no_cache);
  ASSERT_TRUE(cached.ok() && uncached.ok());
  PredictOptions options;
  options.num_samples = 32;
  options.seed = 77;
  auto first = (*cached)->Predict(kRows, 3, options);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*cached)->cache_stats().misses, 1);
  EXPECT_EQ((*cached)->cache_stats().hits, 0);
  // A one-row request with the same (S, seed) reuses the draw.
  auto one =
      (*cached)->Predict(absl::MakeConstSpan(kRows).subspan(0, 2), 1, options);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*cached)->cache_stats().misses, 1);
  EXPECT_EQ((*cached)->cache_stats().hits, 1);
  EXPECT_EQ(one->mean[0], first->mean[0]);
  // The cache changes nothing in the numbers.
  auto fresh = (*uncached)->Predict(kRows, 3, options);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->mean, first->mean);
  EXPECT_EQ(fresh->variance, first->variance);
  EXPECT_EQ((*uncached)->cache_stats().entries, 0);
}

TEST(PredictorTest, CacheEvictsLeastRecentlyUsedWithinItsBudget) {
  auto snapshot = MakeSnapshot(Task::kRegression, 0);
  const int64_t block = snapshot->model.NumParameters() * 8 * 8;  // S=8
  PredictorOptions small;
  small.cache_bytes = 2 * block;
  auto predictor = Predictor::Create(snapshot, small);
  ASSERT_TRUE(predictor.ok());
  PredictOptions options;
  options.num_samples = 8;
  for (uint64_t seed : {1, 2, 3, 1}) {
    options.seed = seed;
    ASSERT_TRUE((*predictor)->Predict(kRows, 3, options).ok());
  }
  // Seeds 1, 2 cached; 3 evicts 1; the second 1 misses again.
  const auto stats = (*predictor)->cache_stats();
  EXPECT_EQ(stats.misses, 4);
  EXPECT_EQ(stats.entries, 2);
  EXPECT_LE(stats.bytes, small.cache_bytes);
}

TEST(PredictorTest, Float32AgreesWithFloat64) {
  auto snapshot = MakeSnapshot(Task::kMulticlass, 3);
  PredictorOptions f32;
  f32.precision = "float32";
  auto a = Predictor::Create(snapshot);
  auto b = Predictor::Create(snapshot, f32);
  ASSERT_TRUE(a.ok() && b.ok());
  PredictOptions options;
  options.num_samples = 16;
  auto pa = (*a)->Predict(kRows, 3, options);
  auto pb = (*b)->Predict(kRows, 3, options);
  ASSERT_TRUE(pa.ok() && pb.ok());
  for (size_t k = 0; k < pa->probabilities.size(); ++k) {
    EXPECT_NEAR(pa->probabilities[k], pb->probabilities[k], 1e-5);
  }
}

// The float32 forward passes (the server's default --predict-precision)
// against float64 on trained posteriors of every family: the predictive
// mean within 1e-4 of the predictive standard deviation, variances
// (total and epistemic) and class probabilities within 1e-4 relative.
TEST(PredictorTest, Float32MatchesFloat64OnTrainedPosteriors) {
  Rng rng(5);
  Dataset regression;
  regression.num_features = 13;
  Dataset classes;
  classes.task = Task::kMulticlass;
  classes.num_features = 13;
  classes.num_classes = 3;
  classes.class_values = {0, 1, 2};
  for (int i = 0; i < 300; ++i) {
    double sum = 0;
    for (int j = 0; j < 13; ++j) {
      const double v = rng.Normal();
      regression.features.push_back(v);
      classes.features.push_back(v);
      sum += (j % 3 == 0 ? 1 : -0.5) * v;
    }
    regression.targets.push_back(std::sin(sum) + 0.1 * rng.Normal());
    classes.targets.push_back(sum < -1 ? 0 : (sum < 1 ? 1 : 2));
  }
  std::vector<double> rows(regression.features.begin(),
                           regression.features.begin() + 50 * 13);
  double worst_mean = 0, worst_var = 0, worst_prob = 0;
  for (const std::string method : {"slang", "noisy_adam", "noisy_kfac", "bali",
                                   "bbb", "mc_dropout", "nng_full"}) {
    for (const Dataset* data : {&regression, &classes}) {
      SCOPED_TRACE(method + (data == &classes ? " multiclass" : " regression"));
      TrainRequest request;
      request.method = method;
      // The full-covariance family is D x D: a smaller net.
      request.hidden_sizes = method == "nng_full" ? std::vector<int>{20}
                                                  : std::vector<int>{50, 50};
      request.params = {{"epochs", "5"}, {"seed", "3"}, {"batch_size", "32"}};
      absl::StatusOr<Snapshot> trained =
          Train(request, *data, MethodRegistry::Builtin());
      ASSERT_TRUE(trained.ok()) << trained.status();
      auto snapshot = std::make_shared<const Snapshot>(*std::move(trained));
      PredictorOptions f32;
      f32.precision = "float32";
      auto p64 = Predictor::Create(snapshot);
      auto p32 = Predictor::Create(snapshot, f32);
      ASSERT_TRUE(p64.ok()) << p64.status();
      ASSERT_TRUE(p32.ok()) << p32.status();
      PredictOptions options;
      options.num_samples = 64;
      options.seed = 7;
      auto a = (*p64)->Predict(rows, 50, options);
      auto b = (*p32)->Predict(rows, 50, options);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
      for (size_t k = 0; k < a->mean.size(); ++k) {
        const double sd = std::sqrt(a->variance[k]);
        worst_mean =
            std::max(worst_mean, std::abs(a->mean[k] - b->mean[k]) / sd);
        EXPECT_NEAR(b->mean[k], a->mean[k], 1e-4 * sd);
        for (auto [x, y] :
             {std::pair{a->variance[k], b->variance[k]},
              std::pair{a->epistemic_variance[k], b->epistemic_variance[k]}}) {
          worst_var = std::max(worst_var, std::abs(x - y) / x);
          EXPECT_NEAR(y, x, 1e-4 * x);
        }
      }
      for (size_t k = 0; k < a->probabilities.size(); ++k) {
        const double p = a->probabilities[k];
        worst_prob =
            std::max(worst_prob, std::abs(p - b->probabilities[k]) / p);
        EXPECT_NEAR(b->probabilities[k], p, 1e-4 * p);
      }
    }
  }
  std::cout << "worst relative: mean/sd " << worst_mean << ", variance "
            << worst_var << ", probability " << worst_prob << "\n";
}

TEST(PredictorTest,
     LinearizedPredictiveAgreesWithMonteCarloForANarrowPosterior) {
  // With a narrow posterior the network is nearly linear over its support, so
  // the GLM variance J Sigma J^T matches the MC variance of sampled means.
  auto s = std::make_shared<Snapshot>();
  s->task = Task::kRegression;
  s->model =
      ModelSpec::ForTask(Task::kRegression, 2, 0, {6}, Activation::kTanh);
  const int64_t dim = s->model.NumParameters();
  Rng rng(12);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, 2);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = rng.Normal();
    d[j] = 400 + 100 * rng.Uniform();
    u(j, 0) = 10 * rng.Normal();
    u(j, 1) = 10 * rng.Normal();
  }
  s->posterior = *LowRankGaussianPosterior::Create(mean, u, d);
  s->standardization.feature_mean = {0, 0};
  s->standardization.feature_std = {1, 1};
  s->standardization.target_std = 3;
  s->noise_precision = 10;
  auto predictor = Predictor::Create(s);
  ASSERT_TRUE(predictor.ok());
  const std::vector<double> x = {0.3, -0.4, 1.2, 0.8};
  PredictOptions mc;
  mc.num_samples = 4096;
  PredictOptions lin;
  lin.linearized = true;
  lin.quantiles = {0.5};
  auto pm = (*predictor)->Predict(x, 2, mc);
  auto pl = (*predictor)->Predict(x, 2, lin);
  ASSERT_TRUE(pm.ok() && pl.ok()) << pl.status();
  EXPECT_EQ(pl->num_samples, 0);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(pl->mean[i], pm->mean[i],
                4 * std::sqrt(pm->epistemic_variance[i] / 4096) + 1e-3);
    // MC relative error of a variance with 4096 draws is ~2.2%.
    EXPECT_NEAR(pl->epistemic_variance[i], pm->epistemic_variance[i],
                0.12 * pm->epistemic_variance[i]);
    EXPECT_DOUBLE_EQ(pl->aleatoric_variance[i], 9.0 / 10);
    EXPECT_NEAR(pl->quantiles[i], pl->mean[i], 1e-6);
  }
}

TEST(PredictorTest, RejectsOptionsTheTaskDoesNotSupport) {
  auto classifier = Predictor::Create(MakeSnapshot(Task::kMulticlass, 3));
  ASSERT_TRUE(classifier.ok());
  PredictOptions o;
  o.linearized = true;
  auto s = (*classifier)->Predict(kRows, 3, o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("regression"), absl::string_view::npos);
  o = {};
  o.quantiles = {0.5};
  EXPECT_EQ((*classifier)->Predict(kRows, 3, o).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto regression = Predictor::Create(MakeSnapshot(Task::kRegression, 0));
  o = {};
  o.quantiles = {0.5, 1.0};
  s = (*regression)->Predict(kRows, 3, o);
  EXPECT_NE(s.status().message().find("quantiles[1] = 1"),
            absl::string_view::npos)
      << s.status();
  o = {};
  o.linearized = true;
  o.per_sample = true;
  EXPECT_EQ((*regression)->Predict(kRows, 3, o).status().code(),
            absl::StatusCode::kInvalidArgument);

  // A sample-set posterior has no linearised predictive.
  auto samples = Predictor::Create(ThreeSampleRegression());
  o = {};
  o.linearized = true;
  s = (*samples)->Predict(std::vector<double>{0.1}, 1, o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace bnn
