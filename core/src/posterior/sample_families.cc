#include "bnn/posterior/sample_families.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"

#include "bnn/core/snapshot.pb.h"
#include "bnn/memory.h"

#include "posterior/sample_tiles.h"

namespace bnn {

// --------------------------------------------------------------- sample set

absl::StatusOr<std::unique_ptr<SampleSetPosterior>> SampleSetPosterior::Create(
    Eigen::MatrixXd samples) {
  if (samples.cols() < 1 || samples.rows() < 1) {
    return absl::InvalidArgumentError("a sample-set posterior needs samples");
  }
  if (!samples.allFinite()) {
    return absl::InvalidArgumentError(
        "sample-set posterior has a non-finite entry");
  }
  auto p = std::unique_ptr<SampleSetPosterior>(new SampleSetPosterior());
  p->mean_ = samples.rowwise().mean();
  p->samples_ = std::move(samples);
  return p;
}

absl::Status SampleSetPosterior::Sample(const CounterRng& rng, int num_samples,
                                        const Interrupt& interrupt,
                                        Eigen::MatrixXd* out) const {
  // Copies only: no tiles, no interrupt checks.
  const int n = num_stored();
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (num_samples != n) {
    Rng shuffle(rng.seed());
    std::shuffle(order.begin(), order.end(), shuffle.engine());
  }
  out->resize(dim(), num_samples);
  for (int s = 0; s < num_samples; ++s)
    out->col(s) = samples_.col(order[s % n]);
  return absl::OkStatus();
}

Eigen::VectorXd SampleSetPosterior::MarginalVariances() const {
  const Eigen::MatrixXd centered = samples_.colwise() - mean_;
  return centered.rowwise().squaredNorm() / std::max(1, num_stored() - 1);
}

absl::StatusOr<Eigen::MatrixXd> SampleSetPosterior::Covariance() const {
  return NotGaussianError(family(), "a Gaussian covariance");
}

absl::StatusOr<double> SampleSetPosterior::KlToPrior(
    const Eigen::VectorXd&) const {
  return NotGaussianError(family(), "a KL divergence");
}

absl::StatusOr<Eigen::VectorXd> SampleSetPosterior::LinearizedVariance(
    const PerExampleGrads<double>&) const {
  return NotGaussianError(family(), "a linearised predictive");
}

void SampleSetPosterior::ToProto(snapshot::Posterior* proto) const {
  auto* p = proto->mutable_samples();
  p->set_num_samples(num_stored());
  p->mutable_samples()->Assign(samples_.data(),
                               samples_.data() + samples_.size());
}

// ------------------------------------------------------------------ dropout

absl::StatusOr<std::unique_ptr<DropoutPosterior>> DropoutPosterior::Create(
    const ModelSpec& model, Eigen::VectorXd weights, double rate,
    std::vector<bool> drop_inputs) {
  const std::vector<LayerShape> shapes = model.Layers();
  if (weights.size() != model.NumParameters()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout posterior has ", weights.size(),
                     " weights; the model has ", model.NumParameters()));
  }
  if (!(rate >= 0 && rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout rate = ", rate, " must be in [0, 1)"));
  }
  if (drop_inputs.size() != shapes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dropout posterior has ", drop_inputs.size(),
                     " layer flags; the model has ", shapes.size(), " layers"));
  }
  if (!weights.allFinite()) {
    return absl::InvalidArgumentError(
        "dropout weights have a non-finite entry");
  }
  auto p = std::unique_ptr<DropoutPosterior>(new DropoutPosterior());
  p->shapes_ = shapes;
  p->weights_ = std::move(weights);
  p->rate_ = rate;
  p->drop_inputs_ = std::move(drop_inputs);
  return p;
}

absl::Status DropoutPosterior::Sample(const CounterRng& rng, int num_samples,
                                      const Interrupt& interrupt,
                                      Eigen::MatrixXd* out) const {
  // Sample s keeps input i of layer l unless uniform number offset_l + i of
  // stream s is below the rate.
  out->resize(dim(), num_samples);
  const double keep_scale = 1.0 / (1.0 - rate_);
  return internal::ForEachSampleTile(
      num_samples, dim(), interrupt, [&](int64_t s) {
        out->col(s) = weights_;
        std::vector<double> u;
        for (size_t l = 0; l < shapes_.size(); ++l) {
          if (!drop_inputs_[l]) continue;
          const LayerShape& shape = shapes_[l];
          u.resize(shape.in);
          rng.FillUniform(static_cast<uint64_t>(s),
                          static_cast<uint64_t>(shape.offset), u.data(),
                          u.size());
          Eigen::Map<Eigen::MatrixXd> w(out->col(s).data() + shape.offset,
                                        shape.out, shape.in + 1);
          for (int i = 0; i < shape.in; ++i) {  // the bias is never dropped
            w.col(i) *= u[i] < rate_ ? 0.0 : keep_scale;
          }
        }
      });
}

Eigen::VectorXd DropoutPosterior::MarginalVariances() const {
  // w m / (1 - p), m ~ Bernoulli(1 - p): variance w^2 p / (1 - p).
  Eigen::VectorXd var = Eigen::VectorXd::Zero(dim());
  for (size_t l = 0; l < shapes_.size(); ++l) {
    if (!drop_inputs_[l]) continue;
    const LayerShape& s = shapes_[l];
    const int64_t n = static_cast<int64_t>(s.out) * s.in;  // weights, no bias
    var.segment(s.offset, n) =
        weights_.segment(s.offset, n).cwiseAbs2() * (rate_ / (1 - rate_));
  }
  return var;
}

absl::StatusOr<Eigen::MatrixXd> DropoutPosterior::Covariance() const {
  return NotGaussianError(family(), "a Gaussian covariance");
}

absl::StatusOr<double> DropoutPosterior::KlToPrior(
    const Eigen::VectorXd&) const {
  return NotGaussianError(family(), "a KL divergence");
}

absl::StatusOr<Eigen::VectorXd> DropoutPosterior::LinearizedVariance(
    const PerExampleGrads<double>&) const {
  return NotGaussianError(family(), "a linearised predictive");
}

void DropoutPosterior::ToProto(snapshot::Posterior* proto) const {
  auto* p = proto->mutable_dropout();
  p->mutable_weights()->Assign(weights_.data(),
                               weights_.data() + weights_.size());
  p->set_rate(rate_);
  for (bool b : drop_inputs_) p->add_drop_inputs(b);
}

int64_t SampleSetPosterior::MemoryBytes() const {
  return MulBytes({dim(), num_stored() + 1, sizeof(double)});
}

int64_t SampleSetPosterior::SampleBytes(int num_samples) const {
  return AddBytes(MulBytes({dim(), num_samples, sizeof(double)}),
                  MulBytes({num_stored(), sizeof(int)}));
}

int64_t DropoutPosterior::MemoryBytes() const {
  return MulBytes({dim(), sizeof(double)});
}

int64_t DropoutPosterior::SampleBytes(int num_samples) const {
  return MulBytes({dim(), num_samples, sizeof(double)});
}

int64_t SampleSetPosterior::LinearizedVarianceBytes(int64_t) const {
  return 0;  // no linearised predictive
}

int64_t DropoutPosterior::LinearizedVarianceBytes(int64_t) const { return 0; }

}  // namespace bnn
