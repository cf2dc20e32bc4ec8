#include "bnn/predict/predictor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "bnn/model/likelihood.h"
#include "bnn/model/network.h"
#include "bnn/posterior/posterior.h"
#include "bnn/random.h"
#include "bnn/status.h"

namespace bnn {
namespace {

// Rows x samples evaluated per forward pass: bounds activation memory.
constexpr int64_t kMaxRowsTimesSamples = 1 << 16;

}  // namespace

struct Predictor::Impl {
  explicit Impl(const ModelSpec& spec) : network(spec) {}
  Network<double> network;
  PredictorOptions options;
};

absl::Status PredictorOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("max_samples", max_samples, 1, 1 << 20));
  return CheckIntRange("chunk_rows", chunk_rows, 1, 1 << 20);
}

absl::StatusOr<std::unique_ptr<Predictor>> Predictor::Create(
    std::shared_ptr<const Snapshot> snapshot, const PredictorOptions& options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  if (snapshot == nullptr || snapshot->posterior == nullptr) {
    return absl::InvalidArgumentError("snapshot has no posterior");
  }
  BNN_RETURN_IF_ERROR(snapshot->model.Validate());
  if (snapshot->posterior->dim() != snapshot->model.NumParameters()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "posterior has ", snapshot->posterior->dim(),
        " parameters; the model has ", snapshot->model.NumParameters()));
  }
  if (IsClassification(snapshot->task) &&
      static_cast<int>(snapshot->class_values.size()) !=
          (snapshot->model.likelihood == Likelihood::kCategorical
               ? snapshot->model.output_dim
               : 2)) {
    return absl::InvalidArgumentError(
        "snapshot class_values do not match the model's outputs");
  }
  auto impl = std::make_unique<Impl>(snapshot->model);
  impl->options = options;
  return std::unique_ptr<Predictor>(
      new Predictor(std::move(snapshot), std::move(impl)));
}

Predictor::Predictor(std::shared_ptr<const Snapshot> snapshot,
                     std::unique_ptr<Impl> impl)
    : snapshot_(std::move(snapshot)), impl_(std::move(impl)) {}

Predictor::~Predictor() = default;

int64_t Predictor::num_features() const { return snapshot_->model.input_dim; }

absl::StatusOr<Prediction> Predictor::Predict(
    const std::vector<double>& rows, int64_t num_rows,
    const PredictOptions& options) const {
  const int s_count = options.num_samples;
  if (s_count < 1 || s_count > impl_->options.max_samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_samples = ", s_count, " must be in [1, ",
                     impl_->options.max_samples, "]"));
  }
  const int64_t p = num_features();
  if (num_rows < 0 || static_cast<int64_t>(rows.size()) != num_rows * p) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows has ", rows.size(), " values; expected ", num_rows, " rows x ",
        p, " features"));
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    if (!std::isfinite(rows[k])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", k / p, ", feature ", k % p, " is not finite (", rows[k], ")"));
    }
  }

  const Snapshot& snap = *snapshot_;
  const ModelSpec& spec = snap.model;
  Rng rng(options.seed);
  Eigen::MatrixXd theta;
  snap.posterior->Sample(s_count, rng, &theta);

  Prediction out;
  out.num_rows = num_rows;
  const bool classification = IsClassification(snap.task);
  const int k = spec.output_dim;
  const int num_classes =
      spec.likelihood == Likelihood::kCategorical ? k : 2;
  if (classification) {
    out.num_classes = num_classes;
    out.probabilities.assign(num_rows * num_classes, 0.0);
    out.predicted_class.resize(num_rows);
    out.entropy.resize(num_rows);
  } else {
    out.mean.resize(num_rows);
    out.variance.resize(num_rows);
    out.epistemic_variance.resize(num_rows);
    out.aleatoric_variance.resize(num_rows);
  }

  const int64_t chunk = std::max<int64_t>(
      1, std::min<int64_t>(impl_->options.chunk_rows,
                           kMaxRowsTimesSamples / s_count));
  Eigen::MatrixXd x;
  ForwardPass<double> pass;
  Eigen::VectorXd probs(num_classes);
  for (int64_t begin = 0; begin < num_rows; begin += chunk) {
    const int64_t m = std::min(chunk, num_rows - begin);
    x.resize(m, p);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < p; ++j) {
        x(i, j) = (rows[(begin + i) * p + j] -
                   snap.standardization.feature_mean[j]) /
                  snap.standardization.feature_std[j];
      }
    }
    impl_->network.Forward(x, theta, &pass);
    const Eigen::MatrixXd& f = pass.output();
    for (int64_t i = 0; i < m; ++i) {
      const int64_t r = begin + i;
      if (!classification) {
        double mean = 0, sq = 0;
        for (int s = 0; s < s_count; ++s) mean += f(s * m + i, 0);
        mean /= s_count;
        for (int s = 0; s < s_count; ++s) {
          const double dev = f(s * m + i, 0) - mean;
          sq += dev * dev;
        }
        const Standardization& st = snap.standardization;
        out.mean[r] = st.UnscaleMean(mean);
        out.epistemic_variance[r] = st.UnscaleVariance(sq / s_count);
        out.aleatoric_variance[r] = st.UnscaleVariance(1.0 / snap.noise_precision);
        out.variance[r] = out.epistemic_variance[r] + out.aleatoric_variance[r];
        continue;
      }
      probs.setZero();
      for (int s = 0; s < s_count; ++s) {
        const auto logits = f.row(s * m + i);
        if (spec.likelihood == Likelihood::kBernoulli) {
          const double p1 = Sigmoid(logits[0]);
          probs[0] += 1.0 - p1;
          probs[1] += p1;
        } else {
          const double mx = logits.maxCoeff();
          const Eigen::ArrayXd e = (logits.array() - mx).exp();
          probs.array() += (e / e.sum()).transpose();
        }
      }
      probs /= s_count;
      int best = 0;
      double entropy = 0;
      for (int c = 0; c < num_classes; ++c) {
        out.probabilities[r * num_classes + c] = probs[c];
        if (probs[c] > probs[best]) best = c;
        if (probs[c] > 0) entropy -= probs[c] * std::log(probs[c]);
      }
      out.predicted_class[r] = snap.class_values[best];
      out.entropy[r] = entropy;
    }
  }
  return out;
}

}  // namespace bnn
