#include "bench/accuracy/scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/check.h"
#include "bnn/linalg/optimize.h"
#include "bnn/predict/evaluation.h"
#include "bnn/predict/metrics.h"
#include "bnn/predict/predictor.h"
#include "bnn/random.h"
#include "bnn/status.h"

namespace bnn::experiment {
namespace {

// Gauss-Hermite nodes for E[log sigmoid(z)], z ~ N(m, v). The integrand is
// smooth on the scale 1 but the posterior sd of a logit reaches ~10 with
// SLANG's near-flat bias prior, so the kink of log sigmoid spans few nodes;
// 96 keeps the quadrature error far below the differences between methods
// (scoring_test.cc checks it against a long Monte Carlo run).
constexpr int kElboQuadratureNodes = 96;

// Every evaluation draws a fresh, seeded set of samples: no cache.
absl::StatusOr<std::unique_ptr<Predictor>> MakePredictor(
    const Snapshot& snapshot) {
  PredictorOptions options;
  options.cache_bytes = 0;
  return Predictor::Create(std::make_shared<const Snapshot>(snapshot), options);
}

double LogSigmoid(double t) {
  return t >= 0 ? -std::log1p(std::exp(-t)) : t - std::log1p(std::exp(t));
}

bool IsLogisticRegression(const Snapshot& snapshot) {
  return snapshot.model.hidden_sizes.empty() &&
         snapshot.model.likelihood == Likelihood::kBernoulli;
}

// E_q[log p(D | theta)] for Bayesian logistic regression by quadrature on
// each example's logit x~^T theta ~ N(x~^T mu, x~^T Sigma x~).
absl::StatusOr<double> LogisticExpectedLogLikelihood(const Snapshot& snapshot,
                                                     const Dataset& data) {
  BNN_ASSIGN_OR_RETURN(const Eigen::MatrixXd cov,
                       snapshot.posterior->Covariance());
  Dataset scaled = data;
  BNN_RETURN_IF_ERROR(snapshot.standardization.Apply(&scaled));
  const LayerShape layer = snapshot.model.Layers()[0];
  const int64_t n = scaled.num_rows();
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(n, layer.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < layer.in; ++j) {
      x(i, layer.Index(0, j)) = scaled.row(i)[j];
    }
    x(i, layer.Index(0, layer.in)) = 1.0;
  }
  const Eigen::VectorXd mean = x * snapshot.posterior->mean();
  const Eigen::VectorXd var = (x * cov).cwiseProduct(x).rowwise().sum();
  static const Quadrature* const quadrature =
      new Quadrature(GaussHermite(kElboQuadratureNodes));
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double sign = scaled.targets[i] > 0.5 ? 1.0 : -1.0;
    const double sd = std::sqrt(std::max(0.0, var[i]));
    for (int k = 0; k < quadrature->nodes.size(); ++k) {
      total += quadrature->weights[k] *
               LogSigmoid(sign * (mean[i] + sd * quadrature->nodes[k]));
    }
  }
  return total;
}

// Ranks 1..n with ties sharing their average rank.
Eigen::VectorXd Ranks(const Eigen::VectorXd& v) {
  const int64_t n = v.size();
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return v[a] < v[b]; });
  Eigen::VectorXd ranks(n);
  for (int64_t begin = 0; begin < n;) {
    int64_t end = begin + 1;
    while (end < n && v[order[end]] == v[order[begin]]) ++end;
    const double average = 0.5 * static_cast<double>(begin + end + 1);
    for (int64_t k = begin; k < end; ++k) ranks[order[k]] = average;
    begin = end;
  }
  return ranks;
}

}  // namespace

absl::StatusOr<RegressionScores> ScoreRegression(const Snapshot& snapshot,
                                                 const Dataset& test,
                                                 int num_samples,
                                                 uint64_t seed) {
  if (snapshot.task != Task::kRegression) {
    return absl::InvalidArgumentError(
        "ScoreRegression needs a regression model");
  }
  BNN_ASSIGN_OR_RETURN(const auto predictor, MakePredictor(snapshot));
  PredictOptions options;
  options.num_samples = num_samples;
  options.seed = seed;
  options.per_sample = true;
  BNN_ASSIGN_OR_RETURN(
      const Prediction p,
      predictor->Predict(test.features, test.num_rows(), options));
  // The model's noise precision is in standardised target units.
  const double target_std = snapshot.standardization.target_std;
  const double tau_orig = snapshot.noise_precision / (target_std * target_std);
  RegressionScores out;
  out.rmse = Rmse(p.mean, test.targets);
  out.test_ll = GaussianMixtureLogLikelihood(p.sample_outputs, num_samples,
                                             test.targets, tau_orig);
  return out;
}

absl::StatusOr<Prediction> PredictRows(const Snapshot& snapshot,
                                       const Dataset& rows, int num_samples,
                                       uint64_t seed) {
  BNN_ASSIGN_OR_RETURN(const auto predictor, MakePredictor(snapshot));
  PredictOptions options;
  options.num_samples = num_samples;
  options.seed = seed;
  return predictor->Predict(rows.features, rows.num_rows(), options);
}

ClassificationScores ScoreProbabilities(const Prediction& p,
                                        const Dataset& test) {
  const int c = p.num_classes;
  ClassificationScores out;
  out.nll = LogLoss(p.probabilities, c, test.targets);
  out.accuracy = Accuracy(p.probabilities, c, test.targets);
  out.ece =
      ExpectedCalibrationError(p.probabilities, c, test.targets, kEceBins);
  out.brier = Brier(p.probabilities, c, test.targets);
  out.reliability =
      ReliabilityDiagram(p.probabilities, c, test.targets, kEceBins);
  out.auroc = std::numeric_limits<double>::quiet_NaN();
  if (c == 2) {
    std::vector<double> scores(test.num_rows());
    std::unique_ptr<bool[]> positive(new bool[test.num_rows()]);
    for (int64_t i = 0; i < test.num_rows(); ++i) {
      scores[i] = p.probabilities[2 * i + 1];
      positive[i] = test.targets[i] > 0.5;
    }
    out.auroc =
        Auroc(scores, absl::MakeConstSpan(positive.get(), test.num_rows()));
  }
  return out;
}

absl::StatusOr<ClassificationScores> ScoreClassification(
    const Snapshot& snapshot, const Dataset& test, int num_samples,
    uint64_t seed) {
  if (!IsClassification(snapshot.task)) {
    return absl::InvalidArgumentError(
        "ScoreClassification needs a classification model");
  }
  BNN_ASSIGN_OR_RETURN(const Prediction p,
                       PredictRows(snapshot, test, num_samples, seed));
  return ScoreProbabilities(p, test);
}

std::vector<RocPoint> RocCurve(absl::Span<const double> scores,
                               absl::Span<const bool> positive,
                               int max_points) {
  BNN_CHECK_EQ(scores.size(), positive.size());
  BNN_CHECK(max_points >= 2);
  const size_t n = scores.size();
  int64_t pos = 0;
  for (bool p : positive) pos += p;
  const int64_t neg = static_cast<int64_t>(n) - pos;
  if (pos == 0 || neg == 0) return {};
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  std::vector<RocPoint> curve;
  curve.push_back({std::numeric_limits<double>::infinity(), 0.0, 0.0});
  int64_t tp = 0, fp = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    // Rows tied on a score cross the threshold together.
    while (j < n && scores[order[j]] == scores[order[i]]) {
      (positive[order[j]] ? tp : fp) += 1;
      ++j;
    }
    curve.push_back({scores[order[i]], static_cast<double>(fp) / neg,
                     static_cast<double>(tp) / pos});
    i = j;
  }
  if (static_cast<int>(curve.size()) <= max_points) return curve;
  std::vector<RocPoint> thinned;
  thinned.reserve(max_points);
  const double stride =
      static_cast<double>(curve.size() - 1) / (max_points - 1);
  for (int k = 0; k < max_points; ++k) {
    thinned.push_back(curve[static_cast<size_t>(std::lround(k * stride))]);
  }
  return thinned;
}

absl::StatusOr<NegativeElbo> NegativeElboPerExample(const Snapshot& snapshot,
                                                    const Dataset& train,
                                                    int mc_samples,
                                                    uint64_t seed) {
  const auto n = static_cast<double>(train.num_rows());
  NegativeElbo out;
  if (IsLogisticRegression(snapshot)) {
    absl::StatusOr<double> expected =
        LogisticExpectedLogLikelihood(snapshot, train);
    // A non-Gaussian family has no covariance: use Monte Carlo below.
    if (expected.ok()) {
      BNN_ASSIGN_OR_RETURN(const Eigen::VectorXd lambda,
                           PriorPrecision(snapshot));
      BNN_ASSIGN_OR_RETURN(const double kl,
                           snapshot.posterior->KlToPrior(lambda));
      out.per_example = (kl - *expected) / n;
      out.estimator = absl::StrCat("gauss_hermite_", kElboQuadratureNodes);
      return out;
    }
  }
  Rng rng(seed);
  BNN_ASSIGN_OR_RETURN(const ElboEstimate elbo,
                       EstimateElbo(snapshot, train, mc_samples, rng));
  out.per_example = -elbo.elbo / n;
  out.standard_error = elbo.standard_error / n;
  out.estimator = absl::StrCat("monte_carlo_", mc_samples);
  return out;
}

double SpearmanCorrelation(const Eigen::VectorXd& a, const Eigen::VectorXd& b) {
  if (a.size() != b.size() || a.size() < 2) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const Eigen::VectorXd ra = Ranks(a), rb = Ranks(b);
  const Eigen::ArrayXd ca = ra.array() - ra.mean();
  const Eigen::ArrayXd cb = rb.array() - rb.mean();
  const double denominator =
      std::sqrt(ca.square().sum()) * std::sqrt(cb.square().sum());
  if (denominator == 0) return std::numeric_limits<double>::quiet_NaN();
  return (ca * cb).sum() / denominator;
}

VarianceAgreement CompareMarginalVariances(const Posterior& posterior,
                                           const Posterior& reference) {
  const Eigen::VectorXd v = posterior.MarginalVariances();
  const Eigen::VectorXd r = reference.MarginalVariances();
  VarianceAgreement out;
  out.spearman = SpearmanCorrelation(v, r);
  out.mean_log_ratio = v.size() == r.size()
                           ? (v.array().log() - r.array().log()).mean()
                           : std::numeric_limits<double>::quiet_NaN();
  return out;
}

}  // namespace bnn::experiment
