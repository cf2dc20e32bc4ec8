// Linear algebra with SLANG's structured precision Sigma^-1 = U U^T + diag(d)
// (U: D x L, d > 0), never forming a D x D matrix (SLANG §5).
#ifndef BNN_LINALG_LOW_RANK_H_
#define BNN_LINALG_LOW_RANK_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <Eigen/Eigenvalues>
#include <Eigen/QR>

#include "bnn/linalg/types.h"
#include "bnn/random.h"

namespace bnn {

// out (+)= a * b for a tall-skinny a (n x k) and a small b (k x m), in
// parallel row chunks that fit in cache. Eigen's GEMM runs this shape
// memory-bound at a fraction of peak (measured: 10 GFLOP/s for
// 478k x 34 x 34); chunking makes each row block a cache-resident GEMM.
template <typename T>
void TallTimesSmall(const Eigen::Ref<const MatrixX<T>>& a, const MatrixX<T>& b,
                    MatrixX<T>* out, bool accumulate = false);

// Factorisation of U U^T + diag(d), computed once and shared by solves and
// samples (their L x L factors are the same). Small factors are double.
// The const methods may run concurrently (a Predictor samples its snapshot's
// posterior from every request at once).
template <typename T>
class LowRankPrecision {
 public:
  // Factors for U (D x L, L may be 0) and d (D, all > 0). Fails if d has a
  // non-positive or non-finite entry.
  absl::Status Factor(const Eigen::Ref<const MatrixX<T>>& u,
                      const Eigen::Ref<const VectorX<T>>& d);

  int64_t dim() const { return d_.size(); }
  // Effective rank after dropping null directions of U (see Factor()).
  int rank() const { return static_cast<int>(v_.cols()); }

  // out = (U U^T + D)^-1 g for a D x K block (SLANG Alg. 2, Woodbury):
  // D^-1 g - D^-1 U (I + U^T D^-1 U)^-1 U^T D^-1 g.
  void Solve(const Eigen::Ref<const MatrixX<T>>& g, MatrixX<T>* out) const;

  // theta_s = mu + y_s for each column eps_s of eps (D x S) with
  // y = d^-1/2 .* (eps - V K V^T eps), V = d^-1/2 .* U, K = (C^-T + V^T V)^-1,
  // C = A^-T (B - I) A^-1, A = chol(V^T V), B = chol(I + A^T A): the
  // corrected fast_sample of SLANG §5.2, exact covariance (U U^T + D)^-1.
  void Sample(const Eigen::Ref<const VectorX<T>>& mu,
              const Eigen::Ref<const MatrixX<T>>& eps, MatrixX<T>* out) const;

  // Sample()'s pieces, for callers that apply it in tiles of rows (the
  // posterior's parallel draw): V (D x rank), K (rank x rank) and d^-1/2.
  const MatrixX<T>& SampleV() const { return v_; }
  const MatrixX<T>& SampleK() const { return k_; }
  const VectorX<T>& InvSqrtD() const { return inv_sqrt_d_; }

  // Woodbury pieces: (U U^T + D)^-1 = D^-1 - Z W Z^T with Z = D^-1/2 V
  // (D x rank) and W = (I + V^T V)^-1 (rank x rank).
  MatrixX<T> WoodburyZ() const { return inv_sqrt_d_.asDiagonal() * v_; }
  const MatrixX<T>& WoodburyW() const { return w_; }
  const VectorX<T>& d() const { return d_; }

  // diag((U U^T + D)^-1) (SLANG §9.7).
  VectorX<double> MarginalVariances() const;
  // log det(U U^T + D) = sum log d + log det(I + V^T V).
  double LogDetPrecision() const;
  // Heap bytes of the factorisation (d, d^-1/2, V, the L x L factors).
  int64_t MemoryBytes() const;

 private:
  VectorX<T> d_;
  VectorX<T> inv_sqrt_d_;
  MatrixX<T> v_;  // d^-1/2 .* U, null directions removed
  MatrixX<T> k_;  // K of Sample(), L x L (cast to T)
  MatrixX<T> w_;  // (I + V^T V)^-1, L x L (cast to T), for Solve()
  double log_det_i_plus_p_ = 0.0;
};

// One-shot forms of the above with the paper's names.
template <typename T>
VectorX<T> FastInverse(const VectorX<T>& g, const MatrixX<T>& u,
                       const VectorX<T>& d);
template <typename T>
VectorX<T> FastSample(const VectorX<T>& mu, const MatrixX<T>& u,
                      const VectorX<T>& d, const VectorX<T>& eps);

// Top eigenpairs of a symmetric PSD operator by randomized subspace iteration
// with a Nystrom finish (SLANG §5.3, after fbpca's `eigens`): K = rank + 2
// uniform(-1, 1) probes, `power_iterations` applications with thin QR, then
// the shifted Nystrom step. The operator is applied power_iterations + 1 times
// to D x K blocks. Exact when the operator's rank is <= K.
template <typename T>
class RandomizedEigSolver {
 public:
  // out = A x for x (D x K).
  using Operator = std::function<void(const MatrixX<T>& x, MatrixX<T>* out)>;

  // Eigenvalues in decreasing order (absolute values, as the reference code
  // returns) and the matching orthonormal eigenvectors (D x rank).
  struct Result {
    VectorX<double> values;
    MatrixX<T> vectors;
  };

  // rank >= 1, power_iterations >= 1.
  // `result` keeps its storage across calls (no D x rank allocation per
  // step).
  void Solve(const Operator& op, int64_t dim, int rank, int power_iterations,
             Rng& rng, Result* result);

 private:
  // Replaces y (D x K) by an orthonormal basis of its range: CholeskyQR2 in
  // double (two GEMM passes, fast for tall-skinny blocks), Householder when y
  // is too ill-conditioned for Cholesky (e.g. rank-deficient).
  void Orthonormalize(MatrixX<T>* y);

  MatrixX<T> q_, y_;
  Eigen::MatrixXd basis_, basis_tmp_;
  Eigen::HouseholderQR<Eigen::MatrixXd> qr_;
};

// The `count` largest eigenpairs of a symmetric n x n matrix, exactly (to
// rounding), without the other n - count eigenvectors. Two routes:
//
// Lanczos (when fewer than n / 8 are wanted and n >= kLanczosMinSize):
// Lanczos with full reorthogonalisation (classical Gram-Schmidt, twice) from
// a fixed start vector, one n x n matrix-vector product per iteration, until
// the top `count` Ritz pairs have residuals below n eps |A|_F. Lanczos alone
// cannot tell a missed eigenvalue (a repeated one, or one the start vector
// misses) from none, so the result is certified: with the found pairs
// (theta_i, y_i) moved to below theta_count, the Cholesky factorisation of
// (theta_count + delta) I - A' must succeed, which holds only if no other
// eigenvalue exceeds theta_count + delta (n^3 / 3 flops, left-looking, at
// the matrix-vector rate). Anything else (no convergence within the iteration
// cap, breakdown, a failed certificate) falls through to the second route.
//
// Householder: tridiagonalisation (4/3 n^3 flops, matrix-vector rate), the
// wanted eigenvalues of the tridiagonal matrix by bisection on Sturm counts
// (LAPACK dstebz; O(n) per count, ~23 sweeps of four counts per eigenvalue)
// when fewer than n / 8 are wanted, else all n by implicit QL (O(n^2)
// serial steps), an eigenvector of the tridiagonal matrix per wanted
// eigenvalue by inverse iteration (two LU solves of O(n) each,
// re-orthogonalised against the ones before; LAPACK's dstein), then the
// Householder reflectors applied to those vectors (2 n^2 count flops).
//
// SelfAdjointEigenSolver with eigenvectors costs ~9 n^3, most of it in the
// vectors this does not form. Workspaces are kept across calls: no
// allocation once the shapes settle.
class TopEigenSolver {
 public:
  enum class Route { kNone, kLanczos, kHouseholder };

  // The smallest n the Lanczos route is tried at. BM_TopEigenSolver, top
  // pair of a Gram matrix whose columns share a mean direction (as SLANG's
  // per-example gradients do): Lanczos 0.012 / 0.017 / 0.108 ms against
  // Householder 0.025 / 0.056 / 0.286 ms at n = 41 / 64 / 129; without the
  // shared direction (its worst case) 0.047 / 0.101 / 0.306 against
  // 0.030 / 0.068 / 0.320. Below 32 either costs microseconds.
  static constexpr int kLanczosMinSize = 32;

  // Eigenvalues in decreasing order into values (count entries; those past
  // n are 0) and matching orthonormal eigenvectors into vectors (n x count;
  // columns past n are 0).
  void Compute(const Eigen::MatrixXd& a, int count, Eigen::VectorXd* values,
               Eigen::MatrixXd* vectors);

  // The Lanczos route's fixed start vector for size n (public so that a
  // test can build a matrix whose top eigenvector it misses).
  static void StartVector(int n, Eigen::VectorXd* start);

  // The smallest n Compute tries the Lanczos route at (default
  // kLanczosMinSize; INT_MAX pins the Householder route), for tests and
  // benchmarks that compare the two.
  void set_lanczos_min_size(int n) { lanczos_min_size_ = n; }

  // The route the last Compute took, and its Lanczos iterations (0 when it
  // did not try Lanczos); for tests and benchmarks.
  Route last_route() const { return last_route_; }
  int last_lanczos_iterations() const { return last_lanczos_iterations_; }

 private:
  // The Lanczos route; false (and nothing written) when it cannot certify
  // its result.
  bool ComputeByLanczos(const Eigen::MatrixXd& a, int wanted,
                        Eigen::VectorXd* values, Eigen::MatrixXd* vectors);
  // The top `wanted` eigenvalues of the tridiagonal matrix (diag_, sub_)
  // into values->head(wanted), their orthonormal eigenvectors into x_.
  void TopOfTridiagonal(int wanted, Eigen::VectorXd* values);

  int lanczos_min_size_ = kLanczosMinSize;
  Route last_route_ = Route::kNone;
  int last_lanczos_iterations_ = 0;
  Eigen::Tridiagonalization<Eigen::MatrixXd> tri_;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig_;
  Eigen::VectorXd diag_, sub_, sub2_;  // sub2_: squared off-diagonal
  // The LU factors of T - sigma I with partial pivoting (dgttrf's d, du,
  // du2, dl, and the row swaps).
  Eigen::VectorXd lu_d_, lu_du_, lu_du2_, lu_dl_;
  std::vector<char> swapped_;
  Eigen::MatrixXd x_;  // eigenvectors of the tridiagonal matrix
  // Lanczos: the basis (n x iterations), the recurrence's coefficients, the
  // current vector and its projections, the Ritz pairs' vectors and
  // residuals, and the certificate's matrix.
  Eigen::MatrixXd basis_, ritz_, residual_, shifted_;
  Eigen::VectorXd alpha_, beta_, w_, h_, ritz_values_;
};

extern template class LowRankPrecision<float>;
extern template class LowRankPrecision<double>;
extern template class RandomizedEigSolver<float>;
extern template class RandomizedEigSolver<double>;

}  // namespace bnn

#endif  // BNN_LINALG_LOW_RANK_H_
