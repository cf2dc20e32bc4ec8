// SLANG: low-rank + diagonal Gaussian VI by approximate natural gradient
// (Mishkin et al., NeurIPS 2018; digest: reference/slang.md §3.3).
#ifndef BNN_METHODS_SLANG_H_
#define BNN_METHODS_SLANG_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

#include "bnn/methods/method.h"
#include "bnn/methods/options.h"

namespace bnn {

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
  // lambda: prior precision of the weights, p(theta) = N(0, 1/lambda).
  double prior_precision = 1.0;
  // Prior precision of the biases (the reference code uses a near-flat one).
  double bias_prior_precision = 1e-6;
  // tau: noise precision of the Gaussian likelihood, in standardised target
  // units (eq. 31). Ignored for classification.
  double noise_precision = 1.0;
  // Power iterations of the randomized eigensolver (§5.3); the operator is
  // applied power_iterations + 1 times per step.
  int power_iterations = 4;
  // d_0: initial diagonal precision (U_0 = 0), s_init of the reference code.
  double init_precision = 1.0;
  // Eigenpairs with eigenvalue <= this are dropped (§3.3 (a)).
  double eig_threshold = 1e-6;
  // "randomized": fast_eig of §5.3 (K = rank + 2 probes, power_iterations).
  // "exact": the top-L eigenpairs of (1-b) U U^T + b c J J^T through the
  // (L + M S)-dimensional Gram matrix of its factors (or the D x D matrix when
  // D is smaller); exact, and cheaper when L + M S is a few hundred.
  std::string eig_solver = "randomized";
  // Arithmetic of the big arrays: "float64" or "float32" (small factorisations
  // are always double). float32 doubles GEMM throughput on large nets.
  std::string precision = "float64";

  // Names the offending field, its value and the violated bound.
  absl::Status Validate() const;
};

// The schema behind `--param` for SLANG (names as in SlangOptions).
const OptionsSchema<SlangOptions>& SlangOptionsSchema();

// online_eig selects SLANG-OnlineEig (reference/slang.md §7): the top-L
// eigenpairs of the EF alone, averaged into U (eqs. 17-21).
absl::StatusOr<std::unique_ptr<VariationalMethod>> CreateSlang(
    const SlangOptions& options, bool online_eig = false);

}  // namespace bnn

#endif  // BNN_METHODS_SLANG_H_
