#include "bnn/predict/evaluation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include <Eigen/Cholesky>

#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/status.h"

namespace bnn {
namespace {

// Rows per forward pass (times S samples) when summing log-likelihoods.
constexpr int64_t kChunkRows = 4096;

absl::StatusOr<double> ParamOr(const ParamMap& params, const std::string& key,
                               double fallback) {
  const auto it = params.find(key);
  if (it == params.end()) return fallback;
  double v;
  if (!absl::SimpleAtod(it->second, &v) || !(v > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot parameter '", key, "' = '", it->second,
                     "' is not a positive number"));
  }
  return v;
}

// KL(N(ma, Sa) || N(mb, Sb)) from dense factors.
double GaussianKl(const Eigen::VectorXd& ma, const Eigen::MatrixXd& sa,
                  const Eigen::LLT<Eigen::MatrixXd>& la,
                  const Eigen::VectorXd& mb,
                  const Eigen::LLT<Eigen::MatrixXd>& lb) {
  const int64_t d = ma.size();
  const Eigen::VectorXd diff = mb - ma;
  const double trace = lb.solve(sa).trace();
  const double maha = diff.dot(lb.solve(diff));
  const double log_det_a = 2 * la.matrixLLT().diagonal().array().log().sum();
  const double log_det_b = 2 * lb.matrixLLT().diagonal().array().log().sum();
  return 0.5 * (trace + maha - static_cast<double>(d) + log_det_b - log_det_a);
}

}  // namespace

absl::StatusOr<Eigen::VectorXd> PriorPrecision(const Snapshot& snapshot) {
  BNN_ASSIGN_OR_RETURN(const double weights,
                       ParamOr(snapshot.params, "prior_precision", 1.0));
  BNN_ASSIGN_OR_RETURN(const double biases,
                       ParamOr(snapshot.params, "bias_prior_precision", 1.0));
  const std::vector<bool> bias = snapshot.model.BiasMask();
  Eigen::VectorXd lambda(bias.size());
  for (size_t j = 0; j < bias.size(); ++j)
    lambda[j] = bias[j] ? biases : weights;
  return lambda;
}

absl::StatusOr<ElboEstimate> EstimateElbo(const Snapshot& snapshot,
                                          const Dataset& data, int num_samples,
                                          Rng& rng) {
  BNN_RETURN_IF_ERROR(CheckIntRange("num_samples", num_samples, 2, 1 << 20));
  if (data.num_features != snapshot.model.input_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data has ", data.num_features, " features; the snapshot expects ",
        snapshot.model.input_dim));
  }
  BNN_ASSIGN_OR_RETURN(const Eigen::VectorXd lambda, PriorPrecision(snapshot));
  BNN_ASSIGN_OR_RETURN(const double kl, snapshot.posterior->KlToPrior(lambda));
  Dataset scaled = data;
  BNN_RETURN_IF_ERROR(snapshot.standardization.Apply(&scaled));

  // The samples of a seed taken from `rng` (so that its state advances).
  const Eigen::MatrixXd theta =
      snapshot.posterior->Draw(rng.engine()(), num_samples);
  const Network<double> net(snapshot.model);
  const ModelSpec& spec = snapshot.model;
  Eigen::VectorXd log_lik = Eigen::VectorXd::Zero(num_samples);
  Eigen::MatrixXd x;
  ForwardPass<double> pass;
  const int64_t n = scaled.num_rows();
  for (int64_t begin = 0; begin < n; begin += kChunkRows) {
    const int64_t m = std::min(kChunkRows, n - begin);
    x.resize(m, scaled.num_features);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < scaled.num_features; ++j)
        x(i, j) = scaled.row(begin + i)[j];
    net.Forward(x, theta, &pass);
    Eigen::VectorXd f(spec.output_dim);
    for (int s = 0; s < num_samples; ++s) {
      for (int64_t i = 0; i < m; ++i) {
        f = pass.output().row(s * m + i).transpose();
        log_lik[s] -= NegLogLikelihood<double>(
            spec.likelihood, f.data(), spec.output_dim,
            scaled.targets[begin + i], snapshot.noise_precision, nullptr);
      }
    }
  }
  ElboEstimate out;
  out.expected_log_likelihood = log_lik.mean();
  out.standard_error =
      std::sqrt((log_lik.array() - log_lik.mean()).square().sum() /
                (num_samples - 1) / num_samples);
  out.kl = kl;
  out.elbo = out.expected_log_likelihood - kl;
  return out;
}

absl::StatusOr<double> SymmetricKl(const Posterior& a, const Posterior& b) {
  if (a.dim() != b.dim()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "posteriors have ", a.dim(), " and ", b.dim(), " parameters"));
  }
  BNN_ASSIGN_OR_RETURN(const Eigen::MatrixXd sa, a.Covariance());
  BNN_ASSIGN_OR_RETURN(const Eigen::MatrixXd sb, b.Covariance());
  const Eigen::LLT<Eigen::MatrixXd> la(sa), lb(sb);
  if (la.info() != Eigen::Success || lb.info() != Eigen::Success) {
    return absl::InvalidArgumentError("a covariance is not positive definite");
  }
  return 0.5 * (GaussianKl(a.mean(), sa, la, b.mean(), lb) +
                GaussianKl(b.mean(), sb, lb, a.mean(), la));
}

}  // namespace bnn
