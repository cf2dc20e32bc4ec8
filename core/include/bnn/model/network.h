// Stateless MLP math over a ModelSpec: forward passes for S weight samples at
// once and backward passes that return per-example gradient factors.
#ifndef BNN_MODEL_NETWORK_H_
#define BNN_MODEL_NETWORK_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "bnn/linalg/types.h"
#include "bnn/model/model_spec.h"
#include "bnn/random.h"

namespace bnn {

// Activations of one forward pass over M rows for S weight samples. Row
// s * M + i of every matrix belongs to weight sample s and example i.
template <typename T>
struct ForwardPass {
  int num_rows = 0;     // M
  int num_samples = 0;  // S
  // inputs[l] = [a_{l-1}, 1]: (M*S) x (in_l + 1); the trailing column of ones
  // is the bias input, so a layer's per-example gradient is delta [a; 1]^T.
  std::vector<MatrixX<T>> inputs;
  // pre[l] = z_l: (M*S) x out_l, pre-activations; pre.back() is the network
  // output (regression mean or logits).
  std::vector<MatrixX<T>> pre;
  // The input masks of the pass (LayerNoise::input_masks, borrowed: they
  // must outlive Backward), or null. unmasked[l] = phi(z_{l-1}) before
  // masking, kept for the masked hidden layers only (phi' in Backward).
  const std::vector<MatrixX<T>>* masks = nullptr;
  std::vector<MatrixX<T>> unmasked;

  const MatrixX<T>& output() const { return pre.back(); }
  bool masked(int layer) const {
    return masks != nullptr && layer < static_cast<int>(masks->size()) &&
           (*masks)[layer].size() > 0;
  }
};

// What a method changes in a forward pass besides the weights: MC dropout's
// masks on the layer inputs and BALI-L's local-reparameterisation noise on
// the pre-activations. Backward differentiates through both (a mask
// multiplies the deltas of its inputs; additive noise passes them on).
template <typename T>
struct LayerNoise {
  // input_masks[l], when non-empty: (M*S) x in_l factors multiplying layer
  // l's inputs a_{l-1} (never the bias column), e.g. 0 or 1/(1-p) for
  // inverted dropout. Missing or empty entries leave a layer unmasked.
  std::vector<MatrixX<T>> input_masks;
  // When set, called for l = 0, 1, ... in order once z_l = A_l W~_l^T is
  // computed and before the activation, with A_l ((M*S) x (in_l + 1)) and
  // z_l to add noise to (BALI-L, eq. 68). The pass then runs on the calling
  // thread, so the hook may draw from the caller's Rng.
  std::function<void(int layer, const MatrixX<T>& inputs, MatrixX<T>* pre)>
      pre_activation_noise;
};

// Heap bytes of a ForwardPass of `spec` over `rows` rows (M * S) with
// scalars of `scalar_bytes` bytes: every layer's inputs [a, 1] and
// pre-activations. For memory estimates (bnn/memory.h).
int64_t ForwardPassBytes(const ModelSpec& spec, int64_t rows, int scalar_bytes);
// Flops of the largest layer GEMM of a forward pass over `rows` rows,
// 2 x rows x (in + 1) x out: how parallel a pass can usefully be
// (bnn/compute_threads.h).
double LargestGemmFlops(const ModelSpec& spec, int64_t rows);

template <typename T>
class PerExampleGrads;

template <typename T>
class Network {
 public:
  // `spec` must be valid (ModelSpec::Validate()).
  explicit Network(const ModelSpec& spec);

  const ModelSpec& spec() const { return spec_; }
  const std::vector<LayerShape>& layers() const { return layers_; }
  int64_t num_parameters() const { return num_parameters_; }

  // Runs x (M x input_dim) through the network for every column of `weights`
  // (D x S), with `noise` (borrowed until Backward) if non-null. Reuses the
  // storage of `pass` when shapes are unchanged.
  void Forward(const Eigen::Ref<const MatrixX<T>>& x,
               const Eigen::Ref<const MatrixX<T>>& weights,
               ForwardPass<T>* pass,
               const LayerNoise<T>* noise = nullptr) const;

  // Back-propagates the per-example negative log-likelihoods of `pass`.
  // `targets` has M entries (regression value or class index) shared by all
  // S samples, or M*S entries, one per row (targets sampled per weight
  // sample, as for the true Fisher). Fills `grads` (which borrows
  // pass->inputs, so `pass` must outlive its use) and, if non-null, `nll`
  // with the M*S per-row negative log-likelihoods.
  void Backward(const Eigen::Ref<const VectorX<T>>& targets, T noise_precision,
                const Eigen::Ref<const MatrixX<T>>& weights,
                const ForwardPass<T>& pass, PerExampleGrads<T>* grads,
                VectorX<T>* nll) const;

  // Per-example gradients of output `output` of the network (not of a
  // likelihood) with respect to theta, for every row of `pass`: the
  // Jacobian rows of the linearised predictive.
  void OutputGradients(const Eigen::Ref<const MatrixX<T>>& weights,
                       const ForwardPass<T>& pass, int output,
                       PerExampleGrads<T>* grads) const;

  // Initial weights for a posterior mean: uniform(-s, s) with s = sqrt(1/in)
  // (PyTorch's nn.Linear default, as in the SLANG reference code) for weights
  // and biases alike.
  VectorX<double> InitialWeights(Rng& rng) const;

 private:
  // Points `grads` at `pass` and sizes it; returns the top layer's deltas.
  MatrixX<T>& PrepareGrads(const ForwardPass<T>& pass,
                           PerExampleGrads<T>* grads) const;
  // delta_{l-1} = (delta_l W_l) .* phi'(z_{l-1}) for every hidden layer,
  // from the top layer's deltas.
  void PropagateDeltas(const Eigen::Ref<const MatrixX<T>>& weights,
                       const ForwardPass<T>& pass,
                       PerExampleGrads<T>* grads) const;

  ModelSpec spec_;
  std::vector<LayerShape> layers_;
  int64_t num_parameters_ = 0;
};

// The D x (M*S) matrix J whose column i is the gradient g_i of example i's
// negative log-likelihood, held as Goodfellow factors: per layer the inputs
// A_l = [a, 1] ((M*S) x (in+1)) and the pre-activation gradients Delta_l
// ((M*S) x out), with g_i restricted to layer l = vec(delta_{l,i} a_{l,i}^T).
// J itself is never formed; every product below costs O(D * M * S) per
// column of its argument and allocates only when a shape changes.
// Heap bytes a PerExampleGrads of `spec` over `rows` rows holds once
// Backward or OutputGradients has filled it: every layer's deltas plus the
// scratch of its products (Sum, SquaredSum, TransposeTimes, Times, one
// thread's probe buffer; Gram's result and its two (M*S)^2 scratch
// products, which SLANG's memory estimate counts, and Materialize's result
// excluded).
int64_t PerExampleGradsBytes(const ModelSpec& spec, int64_t rows,
                             int scalar_bytes);

template <typename T>
class PerExampleGrads {
 public:
  int64_t dim() const { return dim_; }
  int count() const { return count_; }  // M * S
  const std::vector<LayerShape>& layers() const { return layers_; }
  const MatrixX<T>& inputs(int layer) const { return (*inputs_)[layer]; }
  const MatrixX<T>& deltas(int layer) const { return deltas_[layer]; }

  // out = J w (D), w = 1 when `weights` is null: the summed gradient.
  void Sum(VectorX<T>* out, const VectorX<T>* weights = nullptr) const;
  // Column s of out (D x S) = sum of the gradients of weight sample s's M
  // rows: the per-sample minibatch gradients (reparameterisation methods).
  void SumPerSample(int num_samples, MatrixX<T>* out) const;
  // out = sum_i g_i .* g_i (D): the diagonal of J J^T.
  void SquaredSum(VectorX<T>* out) const;
  // out_i = sum_k w_k g_ik^2 for every column i ((M*S)): diag(J^T W J) for a
  // diagonal W, without forming J.
  void WeightedSquaredNorms(const VectorX<T>& w, VectorX<T>* out) const;
  // out = J^T q for q (D x K): (M*S) x K.
  void TransposeTimes(const Eigen::Ref<const MatrixX<T>>& q,
                      MatrixX<T>* out) const;
  // out = J x for x ((M*S) x K): D x K.
  void Times(const Eigen::Ref<const MatrixX<T>>& x, MatrixX<T>* out) const;
  // J^T J ((M*S) x (M*S)), <g_i, g_j> = sum_l (a_i.a_j)(delta_i.delta_j);
  // the second form reuses *out's storage and keeps two (M*S) x (M*S)
  // scratch products for the next call.
  MatrixX<T> Gram() const;
  void Gram(MatrixX<T>* out) const;
  // J itself (D x (M*S)). For tests and tiny models only.
  MatrixX<T> Materialize() const;

  // Per-layer Kronecker statistics (K-FAC's factors, BALI's Psi^xx):
  // out <- decay out + weight A_l^T A_l ((in_l + 1) x (in_l + 1)) and
  // out <- decay out + weight Delta_l^T Delta_l (out_l x out_l), one GEMM.
  void AccumulateInputMoment(int layer, T decay, T weight,
                             MatrixX<T>* out) const;
  void AccumulateDeltaMoment(int layer, T decay, T weight,
                             MatrixX<T>* out) const;

 private:
  friend class Network<T>;

  std::vector<LayerShape> layers_;
  int64_t dim_ = 0;
  int count_ = 0;
  const std::vector<MatrixX<T>>* inputs_ = nullptr;  // owned by ForwardPass
  std::vector<MatrixX<T>> deltas_;
  // Scratch, reused across calls (one per thread for the probe-parallel
  // products).
  struct Scratch {
    // A rows x cols view of a buffer that only grows: no reallocation when
    // the layers' shapes alternate.
    Eigen::Map<MatrixX<T>> View(Eigen::Index rows, Eigen::Index cols) {
      if (buffer.size() < rows * cols) buffer.resize(rows * cols);
      return Eigen::Map<MatrixX<T>>(buffer.data(), rows, cols);
    }
    VectorX<T> buffer;
  };
  int ProbeThreads(int k_count) const;
  Scratch& ThreadScratch(int threads) const;
  // Runs body(k, scratch) for k in [0, k_count), probes spread over threads.
  template <typename Body>
  void ForEachProbe(int k_count, const Body& body) const;
  mutable Scratch gram_a_, gram_b_;  // Gram's per-layer products
  mutable MatrixX<T> scratch_a_;
  mutable MatrixX<T> scratch_b_;
  mutable std::vector<Scratch> thread_scratch_;
};

extern template class Network<float>;
extern template class Network<double>;
extern template class PerExampleGrads<float>;
extern template class PerExampleGrads<double>;

}  // namespace bnn

#endif  // BNN_MODEL_NETWORK_H_
