#include "bnn/model/network.h"

#include <algorithm>
#include <cmath>
#include <omp.h>

#include "bnn/check.h"
#include "bnn/memory.h"
#include "bnn/model/likelihood.h"

#include "model/activation.h"

namespace bnn {
namespace {

// Column-major view of layer `l`'s block W~ = [W b] in weight column `s`.
template <typename T>
Eigen::Map<const MatrixX<T>> LayerWeights(
    const Eigen::Ref<const MatrixX<T>>& weights, int s, const LayerShape& l) {
  return Eigen::Map<const MatrixX<T>>(
      weights.data() + s * weights.outerStride() + l.offset, l.out, l.in + 1);
}

// Threads for a pass over S weight samples of 2 m D flops each: samples are
// independent, so each thread carries whole samples through every layer with
// single-threaded GEMMs (one parallel region per pass instead of one per
// small GEMM, whose fork/join dominated small predictions).
int SampleThreads(int64_t m, int64_t dim, int s_count) {
  if (s_count < 2 || omp_in_parallel()) return 1;
  if (2.0 * static_cast<double>(m) * dim * s_count < 2e6) return 1;
  return std::min(s_count, omp_get_max_threads());
}

}  // namespace

int64_t ForwardPassBytes(const ModelSpec& spec, int64_t rows,
                         int scalar_bytes) {
  int64_t width = 0;  // sum over layers of (in + 1) + out
  for (const LayerShape& shape : spec.Layers())
    width += shape.in + 1 + shape.out;
  return MulBytes({rows, width, scalar_bytes});
}

double LargestGemmFlops(const ModelSpec& spec, int64_t rows) {
  double largest = 0;
  for (const LayerShape& shape : spec.Layers()) {
    largest = std::max(
        largest, 2.0 * static_cast<double>(rows) * (shape.in + 1) * shape.out);
  }
  return largest;
}

int64_t PerExampleGradsBytes(const ModelSpec& spec, int64_t rows,
                             int scalar_bytes) {
  int64_t deltas = 0, widest_in = 0, widest_out = 0;
  for (const LayerShape& shape : spec.Layers()) {
    deltas += shape.out;
    widest_in = std::max<int64_t>(widest_in, shape.in + 1);
    widest_out = std::max<int64_t>(widest_out, shape.out);
  }
  // scratch_a_ (rows x out), scratch_b_ (rows x (in + 1)) and a probe
  // buffer (rows x out) at their largest.
  return MulBytes({rows, deltas + 2 * widest_out + widest_in, scalar_bytes});
}

template <typename T>
Network<T>::Network(const ModelSpec& spec)
    : spec_(spec),
      layers_(spec.Layers()),
      num_parameters_(spec.NumParameters()) {
  BNN_CHECK_OK(spec.Validate());
}

template <typename T>
void Network<T>::Forward(const Eigen::Ref<const MatrixX<T>>& x,
                         const Eigen::Ref<const MatrixX<T>>& weights,
                         ForwardPass<T>* pass,
                         const LayerNoise<T>* noise) const {
  BNN_CHECK_EQ(x.cols(), spec_.input_dim);
  BNN_CHECK_EQ(weights.rows(), num_parameters_);
  const int m = static_cast<int>(x.rows());
  const int s_count = static_cast<int>(weights.cols());
  const int rows = m * s_count;
  const int num_layers = static_cast<int>(layers_.size());
  pass->num_rows = m;
  pass->num_samples = s_count;
  pass->inputs.resize(num_layers);
  pass->pre.resize(num_layers);
  pass->masks = noise != nullptr ? &noise->input_masks : nullptr;
  pass->unmasked.resize(num_layers);

  for (int l = 0; l < num_layers; ++l) {
    pass->inputs[l].resize(rows, layers_[l].in + 1);
    pass->pre[l].resize(rows, layers_[l].out);
    if (pass->masked(l)) {
      BNN_CHECK((*pass->masks)[l].rows() == rows &&
                (*pass->masks)[l].cols() == layers_[l].in);
      if (l > 0) pass->unmasked[l].resize(rows, layers_[l].in);
    }
  }
  MatrixX<T>& in0 = pass->inputs[0];
  for (int s = 0; s < s_count; ++s) {
    in0.block(s * m, 0, m, spec_.input_dim) = x;
  }
  for (int l = 0; l < num_layers; ++l)
    pass->inputs[l].col(layers_[l].in).setOnes();

  // Layer l's pre-activations for sample s, and (after any noise) the next
  // layer's inputs.
  auto linear = [&](int s, int l) {
    const LayerShape& shape = layers_[l];
    if (l == 0 && pass->masked(0)) {
      pass->inputs[0].block(s * m, 0, m, shape.in).array() *=
          (*pass->masks)[0].middleRows(s * m, m).array();
    }
    auto z = pass->pre[l].middleRows(s * m, m);
    z.noalias() = pass->inputs[l].middleRows(s * m, m) *
                  LayerWeights<T>(weights, s, shape).transpose();
  };
  auto activate = [&](int s, int l) {
    if (l + 1 >= num_layers) return;
    auto a = pass->inputs[l + 1].block(s * m, 0, m, layers_[l].out);
    Activate(spec_.activations[l], pass->pre[l].middleRows(s * m, m), a);
    if (pass->masked(l + 1)) {
      pass->unmasked[l + 1].middleRows(s * m, m) = a;
      a.array() *= (*pass->masks)[l + 1].middleRows(s * m, m).array();
    }
  };

  if (noise != nullptr && noise->pre_activation_noise) {
    // Layer by layer on this thread, so the hook sees whole layers in order.
    for (int l = 0; l < num_layers; ++l) {
      for (int s = 0; s < s_count; ++s) linear(s, l);
      noise->pre_activation_noise(l, pass->inputs[l], &pass->pre[l]);
      for (int s = 0; s < s_count; ++s) activate(s, l);
    }
    return;
  }
  const int threads = SampleThreads(m, num_parameters_, s_count);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int s = 0; s < s_count; ++s) {
    for (int l = 0; l < num_layers; ++l) {
      linear(s, l);
      activate(s, l);
    }
  }
}

template <typename T>
MatrixX<T>& Network<T>::PrepareGrads(const ForwardPass<T>& pass,
                                     PerExampleGrads<T>* grads) const {
  const int rows = pass.num_rows * pass.num_samples;
  grads->layers_ = layers_;
  grads->dim_ = num_parameters_;
  grads->count_ = rows;
  grads->inputs_ = &pass.inputs;
  grads->deltas_.resize(layers_.size());
  MatrixX<T>& top = grads->deltas_.back();
  top.resize(rows, spec_.output_dim);
  return top;
}

template <typename T>
void Network<T>::PropagateDeltas(const Eigen::Ref<const MatrixX<T>>& weights,
                                 const ForwardPass<T>& pass,
                                 PerExampleGrads<T>* grads) const {
  const int m = pass.num_rows;
  const int rows = m * pass.num_samples;
  const int num_layers = static_cast<int>(layers_.size());
  for (int l = num_layers - 1; l > 0; --l) {
    grads->deltas_[l - 1].resize(rows, layers_[l].in);
  }
  const int threads = SampleThreads(m, num_parameters_, pass.num_samples);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int s = 0; s < pass.num_samples; ++s) {
    for (int l = num_layers - 1; l > 0; --l) {
      const LayerShape& shape = layers_[l];
      auto below = grads->deltas_[l - 1].middleRows(s * m, m);
      below.noalias() = grads->deltas_[l].middleRows(s * m, m) *
                        LayerWeights<T>(weights, s, shape).leftCols(shape.in);
      // phi' from the unmasked activations; a mask scales the deltas of the
      // inputs it scaled.
      if (pass.masked(l)) {
        below.array() *= (*pass.masks)[l].middleRows(s * m, m).array();
        MultiplyByDerivative(spec_.activations[l - 1],
                             pass.pre[l - 1].middleRows(s * m, m),
                             pass.unmasked[l].middleRows(s * m, m), below);
      } else {
        MultiplyByDerivative(
            spec_.activations[l - 1], pass.pre[l - 1].middleRows(s * m, m),
            pass.inputs[l].block(s * m, 0, m, shape.in), below);
      }
    }
  }
}

template <typename T>
void Network<T>::Backward(const Eigen::Ref<const VectorX<T>>& targets,
                          T noise_precision,
                          const Eigen::Ref<const MatrixX<T>>& weights,
                          const ForwardPass<T>& pass, PerExampleGrads<T>* grads,
                          VectorX<T>* nll) const {
  const int m = pass.num_rows;
  const int rows = m * pass.num_samples;
  // One target per example (shared by the S samples) or one per row.
  const bool per_row = targets.size() == rows;
  BNN_CHECK(per_row || targets.size() == m);
  MatrixX<T>& top = PrepareGrads(pass, grads);

  // Output layer: delta = d(-log p)/dz per row.
  const MatrixX<T>& out = pass.output();
  const int k = spec_.output_dim;
  if (nll != nullptr) nll->resize(rows);
  VectorX<T> f(k), g(k);
  for (int r = 0; r < rows; ++r) {
    f = out.row(r).transpose();
    const T value = NegLogLikelihood<T>(spec_.likelihood, f.data(), k,
                                        targets[per_row ? r : r % m],
                                        noise_precision, g.data());
    top.row(r) = g.transpose();
    if (nll != nullptr) (*nll)[r] = value;
  }
  PropagateDeltas(weights, pass, grads);
}

template <typename T>
void Network<T>::OutputGradients(const Eigen::Ref<const MatrixX<T>>& weights,
                                 const ForwardPass<T>& pass, int output,
                                 PerExampleGrads<T>* grads) const {
  BNN_CHECK(output >= 0 && output < spec_.output_dim);
  MatrixX<T>& top = PrepareGrads(pass, grads);
  top.setZero();
  top.col(output).setOnes();
  PropagateDeltas(weights, pass, grads);
}

template <typename T>
VectorX<double> Network<T>::InitialWeights(Rng& rng) const {
  VectorX<double> theta(num_parameters_);
  for (const LayerShape& l : layers_) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(l.in));
    for (int64_t i = 0; i < l.size(); ++i) {
      theta[l.offset + i] = rng.Uniform(-bound, bound);
    }
  }
  return theta;
}

template <typename T>
void PerExampleGrads<T>::Sum(VectorX<T>* out, const VectorX<T>* weights) const {
  out->resize(dim_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerShape& shape = layers_[l];
    Eigen::Map<MatrixX<T>> block(out->data() + shape.offset, shape.out,
                                 shape.in + 1);
    if (weights == nullptr) {
      block.noalias() = deltas_[l].transpose() * inputs(l);
    } else {
      scratch_a_ = deltas_[l].array().colwise() * weights->array();
      block.noalias() = scratch_a_.transpose() * inputs(l);
    }
  }
}

template <typename T>
void PerExampleGrads<T>::SumPerSample(int num_samples, MatrixX<T>* out) const {
  BNN_CHECK(num_samples > 0 && count_ % num_samples == 0);
  const int m = count_ / num_samples;
  out->resize(dim_, num_samples);
  for (int s = 0; s < num_samples; ++s) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerShape& shape = layers_[l];
      Eigen::Map<MatrixX<T>> block(out->data() + s * dim_ + shape.offset,
                                   shape.out, shape.in + 1);
      block.noalias() = deltas_[l].middleRows(s * m, m).transpose() *
                        inputs(l).middleRows(s * m, m);
    }
  }
}

template <typename T>
void PerExampleGrads<T>::SquaredSum(VectorX<T>* out) const {
  out->resize(dim_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerShape& shape = layers_[l];
    Eigen::Map<MatrixX<T>> block(out->data() + shape.offset, shape.out,
                                 shape.in + 1);
    // (g_i)_{oj} = delta_io a_ij, so sum_i g_i^2 = (Delta^2)^T (A^2).
    scratch_a_ = deltas_[l].array().square();
    scratch_b_ = inputs(l).array().square();
    block.noalias() = scratch_a_.transpose() * scratch_b_;
  }
}

template <typename T>
void PerExampleGrads<T>::WeightedSquaredNorms(const VectorX<T>& w,
                                              VectorX<T>* out) const {
  BNN_CHECK_EQ(w.size(), dim_);
  out->setZero(count_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerShape& shape = layers_[l];
    Eigen::Map<const MatrixX<T>> wl(w.data() + shape.offset, shape.out,
                                    shape.in + 1);
    // sum_{o,j} delta_io^2 w_oj a_ij^2 = rowsum((Delta^2 W) .* A^2).
    scratch_a_ = deltas_[l].array().square();
    scratch_b_.noalias() = scratch_a_ * wl;
    *out += (scratch_b_.array() * inputs(l).array().square())
                .rowwise()
                .sum()
                .matrix();
  }
}

template <typename T>
int PerExampleGrads<T>::ProbeThreads(int k_count) const {
  // One probe costs ~4 D (M S) flops; below ~20 MFLOP per probe the
  // parallel region's overhead is not worth it.
  const double flops = 4.0 * static_cast<double>(dim_) * count_;
  if (k_count < 2 || flops < 2e7 || omp_in_parallel()) return 1;
  return std::min(k_count, omp_get_max_threads());
}

template <typename T>
typename PerExampleGrads<T>::Scratch& PerExampleGrads<T>::ThreadScratch(
    int threads) const {
  // Called once outside the parallel region first, so the resize never runs
  // concurrently.
  if (static_cast<int>(thread_scratch_.size()) < threads) {
    thread_scratch_.resize(threads);
  }
  return thread_scratch_[omp_in_parallel() ? omp_get_thread_num() : 0];
}

template <typename T>
template <typename Body>
void PerExampleGrads<T>::ForEachProbe(int k_count, const Body& body) const {
  // Probes are independent: each thread takes whole probes and runs
  // single-threaded GEMMs whose (M S) x out intermediate stays in cache (one
  // large GEMM over all probes was measured slower: its intermediate streams
  // through memory).
  const int threads = ProbeThreads(k_count);
  ThreadScratch(threads);  // sizes the per-thread scratch before the region
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int k = 0; k < k_count; ++k) body(k, ThreadScratch(threads));
}

template <typename T>
void PerExampleGrads<T>::TransposeTimes(const Eigen::Ref<const MatrixX<T>>& q,
                                        MatrixX<T>* out) const {
  BNN_CHECK_EQ(q.rows(), dim_);
  out->setZero(count_, q.cols());
  ForEachProbe(static_cast<int>(q.cols()), [&](int k, Scratch& scratch) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerShape& shape = layers_[l];
      Eigen::Map<const MatrixX<T>> qk(
          q.data() + k * q.outerStride() + shape.offset, shape.out,
          shape.in + 1);
      // <g_i, q> = delta_i^T Q a_i: rows of (A Q^T) dotted with rows of Delta.
      auto a = scratch.View(count_, shape.out);
      a.noalias() = inputs(l) * qk.transpose();
      out->col(k) += (a.array() * deltas_[l].array()).rowwise().sum().matrix();
    }
  });
}

template <typename T>
void PerExampleGrads<T>::Times(const Eigen::Ref<const MatrixX<T>>& x,
                               MatrixX<T>* out) const {
  BNN_CHECK_EQ(x.rows(), count_);
  out->resize(dim_, x.cols());
  ForEachProbe(static_cast<int>(x.cols()), [&](int k, Scratch& scratch) {
    for (size_t l = 0; l < layers_.size(); ++l) {
      const LayerShape& shape = layers_[l];
      Eigen::Map<MatrixX<T>> block(out->data() + k * dim_ + shape.offset,
                                   shape.out, shape.in + 1);
      auto a = scratch.View(count_, shape.out);
      a = deltas_[l].array().colwise() * x.col(k).array();
      block.noalias() = a.transpose() * inputs(l);
    }
  });
}

template <typename T>
MatrixX<T> PerExampleGrads<T>::Gram() const {
  MatrixX<T> gram;
  Gram(&gram);
  return gram;
}

template <typename T>
void PerExampleGrads<T>::Gram(MatrixX<T>* out) const {
  // Symmetric throughout: per layer the two products as rank updates of
  // their lower triangles (half a GEMM's flops each), their elementwise
  // product summed into the lower triangle, the whole mirrored once.
  const Eigen::Index m = count_;
  out->setZero(m, m);
  auto aat = gram_a_.View(m, m);
  auto ddt = gram_b_.View(m, m);
  for (size_t l = 0; l < layers_.size(); ++l) {
    aat.setZero();
    aat.template selfadjointView<Eigen::Lower>().rankUpdate(
        inputs(static_cast<int>(l)));
    ddt.setZero();
    ddt.template selfadjointView<Eigen::Lower>().rankUpdate(deltas_[l]);
    out->template triangularView<Eigen::Lower>() +=
        (aat.array() * ddt.array()).matrix();
  }
  out->template triangularView<Eigen::StrictlyUpper>() = out->transpose();
}

template <typename T>
MatrixX<T> PerExampleGrads<T>::Materialize() const {
  // Column i of layer l's block is vec(delta_i a_i^T) = a_i (x) delta_i: row
  // j * out + o holds a_ij delta_io, so each input j fills `out` rows at
  // once (a Khatri-Rao product), with no per-example loop.
  MatrixX<T> j(dim_, count_);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerShape& shape = layers_[l];
    for (int in = 0; in <= shape.in; ++in) {
      j.middleRows(shape.offset + static_cast<int64_t>(in) * shape.out,
                   shape.out) = (deltas_[l].transpose().array().rowwise() *
                                 inputs(l).col(in).transpose().array())
                                    .matrix();
    }
  }
  return j;
}

template <typename T>
void PerExampleGrads<T>::AccumulateInputMoment(int layer, T decay, T weight,
                                               MatrixX<T>* out) const {
  *out *= decay;
  out->noalias() += weight * inputs(layer).transpose() * inputs(layer);
}

template <typename T>
void PerExampleGrads<T>::AccumulateDeltaMoment(int layer, T decay, T weight,
                                               MatrixX<T>* out) const {
  *out *= decay;
  out->noalias() += weight * deltas_[layer].transpose() * deltas_[layer];
}

template class Network<float>;
template class Network<double>;
template class PerExampleGrads<float>;
template class PerExampleGrads<double>;

}  // namespace bnn
