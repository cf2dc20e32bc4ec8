// SLANG: low-rank + diagonal Gaussian VI by approximate natural gradient
// (Mishkin et al., NeurIPS 2018, Algorithm 1 and eqs. 7-11).
#ifndef BNN_METHODS_SLANG_H_
#define BNN_METHODS_SLANG_H_

#include <cstdint>

#include "bnn/methods/options.h"
#include "bnn/methods/prior.h"

namespace bnn {

class MethodRegistry;

// How the top-L eigenpairs of each step are found.
enum class EigSolver {
  kAuto,        // whichever of the two below costs fewer flops (EigFlops)
  kRandomized,  // fast_eig (§3.1, App. C.2): K = L + 2 probes
  kExact,       // eigenpairs of the (L + M S) Gram matrix of the factors
};
// Arithmetic of the big arrays (small factorisations are always double).
enum class Arithmetic {
  kAuto,  // float32 for steps large enough to gain from it, else float64
  kFloat64,
  kFloat32,
};

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
  // when L + M S is a few hundred. "auto" (the default) picks, at every
  // step, the route with fewer flops by the cost model of EigFlops() below:
  // the exact route whenever it is cheaper, and it then computes the same
  // eigenpairs as fast_eig would if its probes spanned the range. The
  // paper's tables pin "randomized".
  EigSolver eig_solver = EigSolver::kAuto;
  // "float64" or "float32" for the big arrays (small factorisations are
  // always double). float32 doubles GEMM throughput on large nets. "auto"
  // (the default): float32 when the step's largest layer product (M S rows
  // x (in + 1) x out, 2 flops each) reaches kMinParallelGemmFlops
  // (bnn/compute_threads.h), where the step is GEMM-bound; float64 below,
  // where float32 saves nothing. After 100 steps float32's posterior means
  // were measured within 5e-4 posterior standard deviations of float64's
  // and its marginal variances within 6e-5 relative, on a UCI-size and a
  // mid-size net (tests/core/methods/slang/slang_test.cc, tolerance 1e-3).
  Arithmetic precision = Arithmetic::kAuto;

  // Names the offending field, its value and the violated bound.
  absl::Status Validate() const;
};

// Flops of one step's eigen-update by each route, the cost model of
// eig_solver=auto. With D parameters, p columns of the low-rank factor B
// being updated (L once U is full, plus a warm-start prior's), n = M S
// per-example gradients, K = L + 2 probes, q power iterations, L wanted
// eigenpairs and W = sum over layers of (in + 1 + out):
//   randomized = (q + 1) [4 D n K + 4 D p K + 6 D K^2]
//     (each of the q + 1 operator applications: J^T X and J Y through
//     Goodfellow's factors, B (B^T X), and the CholeskyQR / Nystrom basis
//     work on the D x K block);
//   exact, D > p + n = 2 D n p + 2 D p^2 + 2 n^2 W + 8/3 m^3 + 2 m^2 L
//                      + 2 D m L,  m = p + n
//     (J^T B, B^T B, the Gram matrix J^T J from (a_i.a_j)(delta_i.delta_j),
//     TopEigenSolver's Householder tridiagonalisation of the m x m matrix,
//     4/3 m^3 flops counted twice because its matrix-vector products run at
//     about half the GEMM rate (BM_TopEigenSolver: 8.8-14 GFLOP/s against
//     19-28 for a one-thread double GEMM), its reflectors applied to the L
//     wanted eigenvectors, and the eigenvectors [B, J] W; the eigenvalues,
//     O(m^2), are left out). TopEigenSolver tries Lanczos first when m >= 32
//     and L < m / 8, which is cheaper when it converges early (issue 10's
//     small job) and hands over to the Householder route otherwise: the
//     model keeps the Householder cost, an upper bound of the exact route;
//   exact, D <= p + n = D n + 2 D^2 (p + n) + 8/3 D^3 + 2 D^2 L
//     (J formed, the D x D matrix B B^T + J J^T, its top L eigenpairs).
struct EigFlops {
  double randomized = 0;
  double exact = 0;
};
EigFlops EstimateEigFlops(int64_t dim, int64_t p, int64_t n, int rank,
                          int power_iterations, int64_t layer_width);

// The route eig_solver=auto takes for these shapes (kExact on ties).
EigSolver ResolveEigSolver(const EigFlops& flops);

// The schema behind `--param` for SLANG (names as in SlangOptions).
const OptionsSchema<SlangOptions>& SlangOptionsSchema();

// "slang" and "slang_online_eig" (SLANG-OnlineEig, App. B: the top-L
// eigenpairs of the EF alone, averaged into U, eqs. 17-21).
void RegisterSlang(MethodRegistry& registry);

}  // namespace bnn

#endif  // BNN_METHODS_SLANG_H_
