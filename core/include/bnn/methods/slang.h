// SLANG: low-rank + diagonal Gaussian VI by approximate natural gradient
// (Mishkin et al., NeurIPS 2018, Algorithm 1 and eqs. 7-11).
#ifndef BNN_METHODS_SLANG_H_
#define BNN_METHODS_SLANG_H_

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

// How the top-L eigenpairs of each step are found.
enum class EigSolver {
  kRandomized,  // fast_eig (§3.1, App. C.2): K = L + 2 probes
  kExact,       // eigenpairs of the (L + M S) Gram matrix of the factors
};
// Arithmetic of the big arrays (small factorisations are always double).
enum class Arithmetic { kFloat64, kFloat32 };

struct SlangOptions {
  // L: columns of U in the precision U U^T + diag(d) (eq. 3).
  int rank = 1;
  // S: Monte Carlo weight samples per step; gradients are scaled by N/(M S).
  int mc_samples = 4;
  // M: minibatch size.
  int batch_size = 32;
  // alpha_0: step size of the mean update (eq. 11).
  double learning_rate = 0.01;
  // beta_0: step size of the precision update (eqs. 4, 9).
  double beta = 0.01;
  // omega: alpha_t = alpha_0 / (1 + t^omega), same for beta (SLANG §9.1);
  // 0 disables the decay.
  double decay = 0.0;
  // gamma: bias-corrected EMA of the likelihood gradient (§3.4); 0 disables.
  double momentum = 0.9;
  // lambda of the weights, p(theta) = N(0, 1/lambda), and of the biases
  // (1e-6: the reference code's near-flat bias prior); tau of the Gaussian
  // likelihood in standardised target units (eq. 31; ignored for
  // classification).
  PriorOptions prior = {1.0, 1e-6};
  // Power iterations of the randomized eigensolver (§5.3); the operator is
  // applied power_iterations + 1 times per step.
  int power_iterations = 4;
  // d_0: initial diagonal precision (U_0 = 0), s_init of the reference code.
  double init_precision = 1.0;
  // Eigenpairs with eigenvalue <= this are dropped (§3.3 (a)).
  double eig_threshold = 1e-6;
  // "randomized": fast_eig (App. C.2; K = rank + 2 probes,
  // power_iterations). "exact": the top-L eigenpairs of
  // (1-b) U U^T + b c J J^T through the (L + M S)-dimensional Gram matrix of
  // its factors (or the D x D matrix when D is smaller); exact, and cheaper
  // when L + M S is a few hundred.
  EigSolver eig_solver = EigSolver::kRandomized;
  // "float64" or "float32" for the big arrays (small factorisations are
  // always double). float32 doubles GEMM throughput on large nets.
  Arithmetic precision = Arithmetic::kFloat64;

  // Names the offending field, its value and the violated bound.
  absl::Status Validate() const;
};

// The schema behind `--param` for SLANG (names as in SlangOptions).
const OptionsSchema<SlangOptions>& SlangOptionsSchema();

// "slang" and "slang_online_eig" (SLANG-OnlineEig, App. B: the top-L
// eigenpairs of the EF alone, averaged into U, eqs. 17-21).
void RegisterSlang(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_SLANG_H_
