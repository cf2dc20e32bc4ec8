#include "bnn/linalg/low_rank.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include <Eigen/Eigenvalues>
#include <Eigen/LU>

#include "bnn/check.h"

namespace bnn {
namespace {

// Eigen-directions of V^T V below this fraction of the largest are treated as
// exactly null when U is rank-deficient (their precision contribution is
// below double rounding of d).
constexpr double kNullDirectionTolerance = 1e-12;

// CholeskyQR2 is used when the smallest Cholesky pivot of the column-
// normalised Gram matrix exceeds this fraction of the largest, i.e. cond(Y)
// below about 1e6, where its two passes reach orthogonality to rounding.
constexpr double kCholeskyQrMinPivot = 1e-6;

// Whether the symmetric matrix *m (lower triangle read) has a Cholesky
// factorisation, i.e. is positive definite to rounding; overwrites the
// lower triangle with the factor as far as it gets. Left-looking: column j
// is one matrix-vector product with the columns before it, and the first
// non-positive pivot stops it. At n = 129 (issue 10's small job) it took
// about a third of the time of Eigen::LLT's blocked variant (their shares
// of TopEigenSolver under `perf`: 7.3 of 13 % against 11.5 of 15 %).
bool CholeskySucceeds(Eigen::MatrixXd* m) {
  const Eigen::Index n = m->rows();
  for (Eigen::Index j = 0; j < n; ++j) {
    auto column = m->col(j).tail(n - j);
    if (j > 0) {
      column.noalias() -=
          m->block(j, 0, n - j, j) * m->row(j).head(j).transpose();
    }
    const double pivot = column[0];
    if (!(pivot > 0)) return false;
    column /= std::sqrt(pivot);
  }
  return true;
}

}  // namespace

template <typename T>
void TallTimesSmall(const Eigen::Ref<const MatrixX<T>>& a, const MatrixX<T>& b,
                    MatrixX<T>* out, bool accumulate) {
  BNN_CHECK_EQ(a.cols(), b.rows());
  const Eigen::Index n = a.rows();
  if (!accumulate) out->resize(n, b.cols());
  BNN_CHECK_EQ(out->rows(), n);
  // Rows per chunk: ~256 KiB of `a`.
  const Eigen::Index chunk = std::max<Eigen::Index>(
      64, (int64_t{1} << 18) / sizeof(T) / std::max<Eigen::Index>(1, a.cols()));
  const Eigen::Index chunks = (n + chunk - 1) / chunk;
  const bool parallel = chunks > 1 && n * a.cols() * b.cols() > (1 << 20);
#pragma omp parallel for schedule(static) if (parallel)
  for (Eigen::Index c = 0; c < chunks; ++c) {
    const Eigen::Index begin = c * chunk;
    const Eigen::Index rows = std::min(chunk, n - begin);
    if (accumulate) {
      out->middleRows(begin, rows).noalias() += a.middleRows(begin, rows) * b;
    } else {
      out->middleRows(begin, rows).noalias() = a.middleRows(begin, rows) * b;
    }
  }
}

template <typename T>
absl::Status LowRankPrecision<T>::Factor(
    const Eigen::Ref<const MatrixX<T>>& u,
    const Eigen::Ref<const VectorX<T>>& d) {
  const int64_t dim = d.size();
  if (u.rows() != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("U has ", u.rows(), " rows; d has ", dim, " entries"));
  }
  for (int64_t j = 0; j < dim; ++j) {
    if (!(d[j] > T(0)) || !std::isfinite(static_cast<double>(d[j]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("diagonal precision d[", j, "] = ", d[j],
                       " must be positive and finite"));
    }
  }
  if (!u.allFinite()) {
    return absl::InvalidArgumentError("U has a non-finite entry");
  }
  d_ = d;
  inv_sqrt_d_ = d.array().rsqrt();
  v_.noalias() = inv_sqrt_d_.asDiagonal() * u;

  Eigen::MatrixXd p = (v_.transpose() * v_).template cast<double>();
  Eigen::LLT<Eigen::MatrixXd> llt_p(p);
  bool full_rank = llt_p.info() == Eigen::Success;
  if (full_rank && p.rows() > 0) {
    const double min_pivot = llt_p.matrixLLT().diagonal().minCoeff();
    full_rank = min_pivot * min_pivot >
                kNullDirectionTolerance * p.diagonal().maxCoeff();
  }
  if (!full_rank) {
    // Rotate onto the non-null eigen-directions of V^T V: V' = V W+, so that
    // V' V'^T = V V^T and V'^T V' = diag(lambda+) is positive definite (the
    // reference code's "reduce rank" step).
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(p);
    const double max_eig = std::max(es.eigenvalues().maxCoeff(), 0.0);
    std::vector<int> keep;
    for (int i = 0; i < p.rows(); ++i) {
      if (es.eigenvalues()[i] > kNullDirectionTolerance * max_eig &&
          es.eigenvalues()[i] > 0) {
        keep.push_back(i);
      }
    }
    Eigen::MatrixXd w(p.rows(), static_cast<int>(keep.size()));
    for (size_t c = 0; c < keep.size(); ++c) {
      w.col(c) = es.eigenvectors().col(keep[c]);
    }
    v_ = v_ * w.cast<T>();
    p = (v_.transpose() * v_).template cast<double>();
    llt_p.compute(p);
  }
  const int l = static_cast<int>(v_.cols());
  const Eigen::MatrixXd id = Eigen::MatrixXd::Identity(l, l);

  // Woodbury core for Solve(): (I + P)^-1.
  Eigen::LLT<Eigen::MatrixXd> llt_ip(id + p);
  w_ = llt_ip.solve(id).template cast<T>();
  log_det_i_plus_p_ = 2.0 * llt_ip.matrixLLT().diagonal().array().log().sum();

  // Corrected fast_sample (SLANG §5.2): A = chol(P), B = chol(I + A^T A),
  // C = A^-T (B - I) A^-1 and K = (C^-T + P)^-1 with C^-T = A (B - I)^-T A^T.
  if (l > 0) {
    const Eigen::MatrixXd a = llt_p.matrixL();
    const Eigen::MatrixXd b =
        Eigen::LLT<Eigen::MatrixXd>(id + a.transpose() * a).matrixL();
    const Eigen::MatrixXd b_minus_i = b - id;
    // (B - I)^-T = ((B - I)^-1)^T: B - I is lower triangular with a positive
    // diagonal (B's diagonal exceeds 1 because A is nonsingular).
    const Eigen::MatrixXd e_inv_t =
        b_minus_i.triangularView<Eigen::Lower>().solve(id).transpose();
    const Eigen::MatrixXd c_inv_t = a * e_inv_t * a.transpose();
    k_ = (c_inv_t + p).partialPivLu().inverse().template cast<T>();
  } else {
    k_.resize(0, 0);
  }
  return absl::OkStatus();
}

template <typename T>
void LowRankPrecision<T>::Solve(const Eigen::Ref<const MatrixX<T>>& g,
                                MatrixX<T>* out) const {
  BNN_CHECK_EQ(g.rows(), dim());
  // With U = D^1/2 V: (UU^T + D)^-1 g = D^-1/2 (h - V (I+P)^-1 V^T h),
  // h = D^-1/2 g.
  *out = inv_sqrt_d_.asDiagonal() * g;
  if (v_.cols() > 0) {
    // rank x K, local: the method is const and may run on many threads.
    MatrixX<T> small = v_.transpose() * *out;
    small = w_ * small;
    out->noalias() -= v_ * small;
  }
  *out = inv_sqrt_d_.asDiagonal() * *out;
}

template <typename T>
void LowRankPrecision<T>::Sample(const Eigen::Ref<const VectorX<T>>& mu,
                                 const Eigen::Ref<const MatrixX<T>>& eps,
                                 MatrixX<T>* out) const {
  BNN_CHECK_EQ(eps.rows(), dim());
  BNN_CHECK_EQ(mu.size(), dim());
  *out = eps;
  if (v_.cols() > 0) {
    // rank x S, local: the method is const and may run on many threads.
    MatrixX<T> small = v_.transpose() * eps;
    small = k_ * small;
    out->noalias() -= v_ * small;
  }
  *out = inv_sqrt_d_.asDiagonal() * *out;
  out->colwise() += mu;
}

template <typename T>
int64_t LowRankPrecision<T>::MemoryBytes() const {
  return static_cast<int64_t>(sizeof(T)) *
         (d_.size() + inv_sqrt_d_.size() + v_.size() + k_.size() + w_.size());
}

template <typename T>
VectorX<double> LowRankPrecision<T>::MarginalVariances() const {
  VectorX<double> var = d_.template cast<double>().cwiseInverse();
  if (v_.cols() > 0) {
    const Eigen::MatrixXd v = v_.template cast<double>();
    const Eigen::MatrixXd vw = v * w_.template cast<double>();
    var.array() *= 1.0 - (vw.array() * v.array()).rowwise().sum();
  }
  return var;
}

template <typename T>
double LowRankPrecision<T>::LogDetPrecision() const {
  return d_.template cast<double>().array().log().sum() + log_det_i_plus_p_;
}

template <typename T>
VectorX<T> FastInverse(const VectorX<T>& g, const MatrixX<T>& u,
                       const VectorX<T>& d) {
  LowRankPrecision<T> f;
  BNN_CHECK_OK(f.Factor(u, d));
  MatrixX<T> out;
  f.Solve(g, &out);
  return out.col(0);
}

template <typename T>
VectorX<T> FastSample(const VectorX<T>& mu, const MatrixX<T>& u,
                      const VectorX<T>& d, const VectorX<T>& eps) {
  LowRankPrecision<T> f;
  BNN_CHECK_OK(f.Factor(u, d));
  MatrixX<T> out;
  f.Sample(mu, eps, &out);
  return out.col(0);
}

template <typename T>
void RandomizedEigSolver<T>::Orthonormalize(MatrixX<T>* y) {
  // CholeskyQR in double on the column-scaled Gram matrix (scale differences
  // are not ill-conditioning): B <- B S R^-1 with S = diag(1/|b_j|) and
  // R^T R = S B^T B S. One pass leaves an orthogonality error ~ eps cond^2;
  // a second pass (CholeskyQR2) runs only when that exceeds 1e-8. Nystrom is
  // invariant to the basis, so this only guards its conditioning.
  Eigen::MatrixXd* b = nullptr;
  if constexpr (std::is_same_v<T, double>) {
    b = y;
  } else {
    basis_ = y->template cast<double>();
    b = &basis_;
  }
  const int k = static_cast<int>(b->cols());
  bool cholesky_ok = true;
  for (int pass = 0; pass < 2 && cholesky_ok; ++pass) {
    Eigen::MatrixXd gram = b->transpose() * *b;
    const Eigen::VectorXd scale = gram.diagonal().cwiseSqrt().cwiseInverse();
    cholesky_ok = scale.allFinite();
    if (!cholesky_ok) break;
    gram = scale.asDiagonal() * gram * scale.asDiagonal();
    Eigen::LLT<Eigen::MatrixXd> llt(gram);
    cholesky_ok = llt.info() == Eigen::Success;
    if (!cholesky_ok) break;
    const Eigen::VectorXd pivots = llt.matrixLLT().diagonal();
    const double ratio = pivots.maxCoeff() / pivots.minCoeff();
    cholesky_ok = ratio < 1.0 / kCholeskyQrMinPivot;
    if (!cholesky_ok) break;
    const Eigen::MatrixXd r_inv =
        scale.asDiagonal() *
        llt.matrixU().solve(Eigen::MatrixXd::Identity(k, k));
    TallTimesSmall<double>(*b, r_inv, &basis_tmp_);
    b->swap(basis_tmp_);
    if (ratio * ratio * Eigen::NumTraits<double>::epsilon() < 1e-8) break;
  }
  if (!cholesky_ok) {
    // Householder for (nearly) rank-deficient blocks; the range is unchanged
    // by any column scaling applied above.
    qr_.compute(*b);
    b->setIdentity(b->rows(), k);
    b->applyOnTheLeft(qr_.householderQ());
  }
  if constexpr (!std::is_same_v<T, double>) *y = b->template cast<T>();
}

template <typename T>
void RandomizedEigSolver<T>::Solve(const Operator& op, int64_t dim, int rank,
                                   int power_iterations, Rng& rng,
                                   Result* result_out) {
  Result& result = *result_out;
  BNN_CHECK(rank >= 1 && power_iterations >= 1 && dim >= 1);
  rank = static_cast<int>(std::min<int64_t>(rank, dim));
  const int k = static_cast<int>(std::min<int64_t>(rank + 2, dim));

  q_.resize(dim, k);
  for (int c = 0; c < k; ++c) {
    for (int64_t r = 0; r < dim; ++r) q_(r, c) = T(rng.Uniform(-1.0, 1.0));
  }
  for (int it = 0; it + 1 < power_iterations; ++it) {
    op(q_, &y_);
    q_.swap(y_);
    Orthonormalize(&q_);
  }
  op(q_, &y_);
  // Spectral-norm estimate for the Nystrom shift (fbpca's anorm).
  double anorm = 0;
  for (int c = 0; c < k; ++c) {
    const double qn = static_cast<double>(q_.col(c).norm());
    if (qn > 0)
      anorm = std::max(anorm, static_cast<double>(y_.col(c).norm()) / qn);
  }
  q_.swap(y_);
  Orthonormalize(&q_);

  op(q_, &y_);  // y = A Q
  if (!(anorm > 0)) {
    result.values = VectorX<double>::Zero(rank);
    result.vectors = q_.leftCols(rank);
    return;
  }
  // Nystrom with a small shift to keep Q^T (A + shift I) Q positive definite.
  const double shift = std::max(1e-7, 10.0 * Eigen::NumTraits<T>::epsilon()) *
                       anorm * std::sqrt(static_cast<double>(dim));
  y_ += T(shift) * q_;  // E = (A + shift I) Q
  Eigen::MatrixXd r = (q_.transpose() * y_).template cast<double>();
  r = 0.5 * (r + r.transpose()).eval();
  Eigen::LLT<Eigen::MatrixXd> llt(r);
  Eigen::VectorXd evals;
  Eigen::MatrixXd small;  // D x K eigenvectors = E * small
  if (llt.info() == Eigen::Success) {
    // F = R^-1 E^T; F F^T = R^-1 (E^T E) R^-T; vectors F^T W / sigma.
    const Eigen::MatrixXd ete = (y_.transpose() * y_).template cast<double>();
    const Eigen::MatrixXd rl = llt.matrixL();
    const Eigen::MatrixXd rinv_ete =
        rl.triangularView<Eigen::Lower>().solve(ete);
    const Eigen::MatrixXd fft =
        rl.triangularView<Eigen::Lower>().solve(rinv_ete.transpose());
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(0.5 *
                                                      (fft + fft.transpose()));
    const Eigen::VectorXd sigma2 = es.eigenvalues().cwiseMax(0.0);
    Eigen::VectorXd inv_sigma(k);
    for (int i = 0; i < k; ++i) {
      inv_sigma[i] = sigma2[i] > 0 ? 1.0 / std::sqrt(sigma2[i]) : 0.0;
    }
    // R^-T W diag(1/sigma).
    small =
        rl.transpose().triangularView<Eigen::Upper>().solve(es.eigenvectors()) *
        inv_sigma.asDiagonal();
    evals = sigma2.array() - shift;
  } else {
    // Rayleigh-Ritz fallback: eig(Q^T A Q), vectors Q W.
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(r);
    evals = es.eigenvalues().array() - shift;
    small = es.eigenvectors();
    y_ = q_;
  }
  // Largest |eigenvalue| first.
  std::vector<int> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::abs(evals[a]) > std::abs(evals[b]);
  });
  Eigen::MatrixXd pick(k, rank);
  result.values.resize(rank);
  for (int i = 0; i < rank; ++i) {
    result.values[i] = std::abs(evals[order[i]]);
    pick.col(i) = small.col(order[i]);
  }
  TallTimesSmall<T>(y_, pick.cast<T>(), &result.vectors);
}

template void TallTimesSmall<float>(const Eigen::Ref<const MatrixX<float>>&,
                                    const MatrixX<float>&, MatrixX<float>*,
                                    bool);
template void TallTimesSmall<double>(const Eigen::Ref<const MatrixX<double>>&,
                                     const MatrixX<double>&, MatrixX<double>*,
                                     bool);
namespace {

// Gershgorin interval of a symmetric tridiagonal matrix (diagonal d,
// off-diagonal e), widened as LAPACK's dstebz does so that bisection's
// rounding cannot push an eigenvalue out of it; `norm` bounds |T|, and
// `pivmin` is the smallest pivot magnitude a Sturm count lets through.
struct TridiagonalBounds {
  double lower, upper, norm, pivmin;
};

TridiagonalBounds Gershgorin(const Eigen::VectorXd& d,
                             const Eigen::VectorXd& e) {
  const int n = static_cast<int>(d.size());
  double lower = d[0], upper = d[0], max_e2 = 0;
  for (int i = 0; i < n; ++i) {
    const double radius =
        (i > 0 ? std::abs(e[i - 1]) : 0.0) + (i + 1 < n ? std::abs(e[i]) : 0.0);
    lower = std::min(lower, d[i] - radius);
    upper = std::max(upper, d[i] + radius);
    if (i + 1 < n) max_e2 = std::max(max_e2, e[i] * e[i]);
  }
  TridiagonalBounds b;
  b.pivmin = std::numeric_limits<double>::min() * std::max(1.0, max_e2);
  b.norm = std::max(std::abs(lower), std::abs(upper));
  const double fudge =
      2.1 * std::numeric_limits<double>::epsilon() * b.norm * n +
      2.1 * 2 * b.pivmin;
  b.lower = lower - fudge;
  b.upper = upper + fudge;
  return b;
}

// Sturm counts: count[k] = the number of eigenvalues of T (diagonal d,
// squared off-diagonal e2) that are <= x[k], as the negative or zero pivots
// of the LDL^T factorisation of T - x[k] I; a pivot smaller than pivmin
// becomes -pivmin (LAPACK dlaebz). Four shifts per sweep: their chains of
// divisions are independent, so they overlap in the pipeline.
void SturmCounts(const Eigen::VectorXd& d, const Eigen::VectorXd& e2,
                 const double x[4], double pivmin, int count[4]) {
  const int n = static_cast<int>(d.size());
  double q[4];
  for (int k = 0; k < 4; ++k) {
    q[k] = d[0] - x[k];
    if (std::abs(q[k]) < pivmin) q[k] = -pivmin;
    count[k] = q[k] <= 0 ? 1 : 0;
  }
  for (int i = 1; i < n; ++i) {
    for (int k = 0; k < 4; ++k) {
      q[k] = (d[i] - x[k]) - e2[i - 1] / q[k];
      if (std::abs(q[k]) < pivmin) q[k] = -pivmin;
      count[k] += q[k] <= 0 ? 1 : 0;
    }
  }
}

// Eigenvalue `index` (0 = the smallest) of T, given lower < it <= *upper,
// by multisection: four Sturm counts split the bracket into five parts per
// sweep, until it is as narrow as rounding allows (abstol, or 2 eps of
// its ends). ~23 sweeps of n steps instead of QL's O(n^2) for all of them.
// Returns the bracket's midpoint and leaves its upper end in *upper (at
// least index + 1 eigenvalues are <= it: the next lower eigenvalue's bound).
double BisectEigenvalue(const Eigen::VectorXd& d, const Eigen::VectorXd& e2,
                        int index, double lower, double* upper_io,
                        double pivmin, double abstol) {
  double upper = *upper_io;
  const double eps = std::numeric_limits<double>::epsilon();
  for (int sweep = 0; sweep < 200; ++sweep) {
    const double width = upper - lower;
    if (width <=
        std::max(abstol,
                 2 * eps * std::max(std::abs(lower), std::abs(upper)))) {
      break;
    }
    double x[4];
    int count[4];
    for (int k = 0; k < 4; ++k) x[k] = lower + (k + 1) * (width / 5);
    SturmCounts(d, e2, x, pivmin, count);
    // The counts grow with x: the bracket becomes the part between the
    // last shift with <= index eigenvalues below and the first with more.
    double new_lower = lower, new_upper = upper;
    for (int k = 0; k < 4; ++k) {
      if (count[k] <= index) {
        new_lower = x[k];
      } else {
        new_upper = x[k];
        break;
      }
    }
    if (new_lower == lower && new_upper == upper) break;  // no progress
    lower = new_lower;
    upper = new_upper;
  }
  *upper_io = upper;
  return 0.5 * (lower + upper);
}

}  // namespace

void TopEigenSolver::Compute(const Eigen::MatrixXd& a, int count,
                             Eigen::VectorXd* values,
                             Eigen::MatrixXd* vectors) {
  const int n = static_cast<int>(a.rows());
  BNN_CHECK_EQ(a.cols(), n);
  values->setZero(count);
  vectors->setZero(n, count);
  last_route_ = Route::kNone;
  last_lanczos_iterations_ = 0;
  const int wanted = std::min(count, n);
  if (wanted == 0) return;
  if (n >= lanczos_min_size_ && 8 * wanted < n &&
      ComputeByLanczos(a, wanted, values, vectors)) {
    last_route_ = Route::kLanczos;
    return;
  }
  last_route_ = Route::kHouseholder;
  if (n == 1) {
    (*values)[0] = a(0, 0);
    (*vectors)(0, 0) = 1.0;
    return;
  }
  // A = Q T Q^T, T tridiagonal.
  tri_.compute(a);
  diag_ = tri_.diagonal();
  sub_ = tri_.subDiagonal();
  TopOfTridiagonal(wanted, values);
  // Eigenvectors of A = Q (eigenvectors of T).
  vectors->leftCols(wanted) = tri_.matrixQ() * x_;
}

void TopEigenSolver::TopOfTridiagonal(int wanted, Eigen::VectorXd* values) {
  const int n = static_cast<int>(diag_.size());
  x_.resize(n, wanted);
  if (n == 1) {
    (*values)[0] = diag_[0];
    x_(0, 0) = 1.0;
    return;
  }
  // The top `wanted` eigenvalues by bisection (or all by QL), then their
  // eigenvectors by inverse iteration.
  const double eps = std::numeric_limits<double>::epsilon();
  const TridiagonalBounds bounds = Gershgorin(diag_, sub_);
  if (bounds.norm == 0) {
    // T = 0: any orthonormal vectors are eigenvectors (inverse iteration
    // would divide by a zero scale).
    values->head(wanted).setZero();
    x_.setIdentity();
    return;
  }
  const double norm = bounds.norm;
  lu_d_.resize(n);
  lu_du_.resize(n);
  lu_du2_.resize(n);
  lu_dl_.resize(n);
  swapped_.resize(n);
  // Bisection costs ~23 sweeps x n steps per wanted eigenvalue, QL ~n^2
  // steps for all of them, so QL is cheaper when many of them are wanted:
  // measured, bisection made the UCI step (n = 41, 1 wanted) 25% faster
  // and the logistic-regression step (n = 15, 5 wanted) 30% slower.
  const bool bisect = 8 * wanted < n;
  if (bisect) {
    sub2_ = sub_.array().square();
  } else {
    eig_.computeFromTridiagonal(diag_, sub_, Eigen::EigenvaluesOnly);
  }
  double upper = bounds.upper;  // >= every eigenvalue still wanted
  for (int k = 0; k < wanted; ++k) {
    const double value =
        bisect ? BisectEigenvalue(diag_, sub2_, n - 1 - k, bounds.lower, &upper,
                                  bounds.pivmin, eps * bounds.norm)
               : eig_.eigenvalues()[n - 1 - k];
    (*values)[k] = value;
    // LU with partial pivoting of T - value I (LAPACK dgttrf); a zero pivot
    // (value is an eigenvalue to rounding) becomes eps |T|, which makes the
    // solve amplify exactly the wanted direction.
    for (int i = 0; i < n; ++i) lu_d_[i] = diag_[i] - value;
    for (int i = 0; i + 1 < n; ++i) {
      lu_du_[i] = sub_[i];
      lu_dl_[i] = sub_[i];
    }
    for (int i = 0; i + 1 < n; ++i) {
      lu_du2_[i] = 0;
      if (std::abs(lu_d_[i]) >= std::abs(lu_dl_[i])) {
        swapped_[i] = 0;
        if (lu_d_[i] == 0) lu_d_[i] = eps * norm;
        const double f = lu_dl_[i] / lu_d_[i];
        lu_dl_[i] = f;
        lu_d_[i + 1] -= f * lu_du_[i];
      } else {
        swapped_[i] = 1;
        const double f = lu_d_[i] / lu_dl_[i];
        lu_d_[i] = lu_dl_[i];
        lu_dl_[i] = f;
        const double temp = lu_du_[i];
        lu_du_[i] = lu_d_[i + 1];
        lu_d_[i + 1] = temp - f * lu_d_[i + 1];
        if (i + 2 < n) {
          lu_du2_[i] = lu_du_[i + 1];
          lu_du_[i + 1] = -f * lu_du_[i + 1];
        }
      }
    }
    if (lu_d_[n - 1] == 0) lu_d_[n - 1] = eps * norm;
    // A start vector with no special structure (and not the same for two
    // eigenvalues of a cluster), then three solves; each solve multiplies
    // the wanted component by ~1 / (eps |T|) relative to the others.
    auto x = x_.col(k);
    for (int i = 0; i < n; ++i)
      x[i] = 1.0 + 0.5 * std::sin(1.0 + 0.37 * i + 1.7 * k);
    for (int iteration = 0; iteration < 3; ++iteration) {
      x.normalize();
      // Solve L U y = P x: forward with the row swaps, then back.
      for (int i = 0; i + 1 < n; ++i) {
        if (swapped_[i]) {
          const double temp = x[i];
          x[i] = x[i + 1];
          x[i + 1] = temp - lu_dl_[i] * x[i];
        } else {
          x[i + 1] -= lu_dl_[i] * x[i];
        }
      }
      x[n - 1] /= lu_d_[n - 1];
      x[n - 2] = (x[n - 2] - lu_du_[n - 2] * x[n - 1]) / lu_d_[n - 2];
      for (int i = n - 3; i >= 0; --i) {
        x[i] = (x[i] - lu_du_[i] * x[i + 1] - lu_du2_[i] * x[i + 2]) / lu_d_[i];
      }
      // Eigenvectors of (nearly) equal eigenvalues are not determined by
      // inverse iteration alone: keep x orthogonal to those found before
      // (twice: Gram-Schmidt loses orthogonality once).
      for (int pass = 0; pass < 2; ++pass) {
        for (int j = 0; j < k; ++j) x -= x_.col(j).dot(x) * x_.col(j);
      }
    }
    x.normalize();
  }
}

void TopEigenSolver::StartVector(int n, Eigen::VectorXd* start) {
  // Without structure (splitmix64 of the index), so that results repeat and
  // no eigenvector of a structured matrix (a diagonal one, a permutation)
  // is orthogonal to it.
  start->resize(n);
  for (int i = 0; i < n; ++i) {
    uint64_t z = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    (*start)[i] = static_cast<double>(z >> 11) * 0x1.0p-53 - 0.5;
  }
  start->normalize();
}

bool TopEigenSolver::ComputeByLanczos(const Eigen::MatrixXd& a, int wanted,
                                      Eigen::VectorXd* values,
                                      Eigen::MatrixXd* vectors) {
  const int n = static_cast<int>(a.rows());
  const double norm = a.norm();  // Frobenius: >= the spectral norm
  if (!(norm > 0) || !std::isfinite(norm)) return false;
  // Backward error of the Householder route's order (n eps |A|); the
  // recurrence's residual estimates must reach a quarter of it, so that
  // the computed true residual (itself rounded at ~sqrt(n) eps |A|) passes.
  const double tol = n * std::numeric_limits<double>::epsilon() * norm;
  // Lanczos' j-th iteration costs 2 n^2 + 8 n j flops at the matrix-vector
  // rate, the Householder route 4/3 n^3 at the same rate: past n / 3
  // iterations (plus the certificate) it would cost more.
  const int cap = std::min(n, std::max(2 * wanted + 16, n / 3));
  basis_.resize(n, cap + 1);
  alpha_.resize(cap);
  beta_.resize(cap);
  h_.resize(cap);
  ritz_values_.resize(wanted);
  StartVector(n, &w_);
  basis_.col(0) = w_;
  int size = 0;  // the converged Krylov basis' size; 0: not converged
  int next_check = std::max(wanted + 1, 8);
  for (int j = 0; j < cap; ++j) {
    // w = A q_j, orthogonalised against the whole basis twice (classical
    // Gram-Schmidt loses orthogonality once; twice is enough): alpha_j is
    // q_j^T A q_j, the other projections are rounding.
    const auto q = basis_.leftCols(j + 1);
    w_.noalias() = a * basis_.col(j);
    h_.head(j + 1).noalias() = q.transpose() * w_;
    alpha_[j] = h_[j];
    w_.noalias() -= q * h_.head(j + 1);
    h_.head(j + 1).noalias() = q.transpose() * w_;
    alpha_[j] += h_[j];
    w_.noalias() -= q * h_.head(j + 1);
    beta_[j] = w_.norm();
    const int k = j + 1;
    // beta_j <= tol: the basis spans an invariant subspace to rounding.
    const bool breakdown = beta_[j] <= tol;
    if (k >= wanted && (breakdown || k >= next_check || k == cap)) {
      // Ritz pairs of T_k; the residual of pair i is beta_j |x_(k - 1, i)|.
      diag_ = alpha_.head(k);
      sub_ = beta_.head(k - 1);
      TopOfTridiagonal(wanted, &ritz_values_);
      double worst = 0;
      for (int i = 0; i < wanted; ++i) {
        worst = std::max(worst, beta_[j] * std::abs(x_(k - 1, i)));
      }
      if (worst <= tol / 4) {
        size = k;
        break;
      }
      next_check = k + std::max(4, k / 8);
    }
    if (breakdown) return false;  // fewer than `wanted` pairs in reach
    basis_.col(j + 1) = w_ / beta_[j];
  }
  last_lanczos_iterations_ = size > 0 ? size : cap;
  if (size == 0) return false;
  // The Ritz vectors, and their true residuals.
  ritz_.noalias() = basis_.leftCols(size) * x_;
  residual_.noalias() = a * ritz_;
  residual_.noalias() -= ritz_ * ritz_values_.asDiagonal();
  if (residual_.colwise().norm().maxCoeff() > tol) return false;
  // The certificate: with each found eigenvalue moved to theta - delta,
  // (theta + delta) I - A' is positive definite iff every eigenvalue of A
  // not found is below theta + delta, theta the smallest found. delta is
  // well above both the residuals' effect (<= tol) and Cholesky's rounding.
  const double theta = ritz_values_[wanted - 1];
  const double delta = 4 * tol;
  shifted_ = -a;
  shifted_.diagonal().array() += theta + delta;
  residual_.noalias() =
      ritz_ * (ritz_values_.array() - (theta - delta)).matrix().asDiagonal();
  shifted_.noalias() += residual_ * ritz_.transpose();
  if (!CholeskySucceeds(&shifted_)) return false;
  values->head(wanted) = ritz_values_;
  vectors->leftCols(wanted) = ritz_;
  return true;
}

template class LowRankPrecision<float>;
template class LowRankPrecision<double>;
template class RandomizedEigSolver<float>;
template class RandomizedEigSolver<double>;
template VectorX<float> FastInverse(const VectorX<float>&,
                                    const MatrixX<float>&,
                                    const VectorX<float>&);
template VectorX<double> FastInverse(const VectorX<double>&,
                                     const MatrixX<double>&,
                                     const VectorX<double>&);
template VectorX<float> FastSample(const VectorX<float>&, const MatrixX<float>&,
                                   const VectorX<float>&,
                                   const VectorX<float>&);
template VectorX<double> FastSample(const VectorX<double>&,
                                    const MatrixX<double>&,
                                    const VectorX<double>&,
                                    const VectorX<double>&);

}  // namespace bnn
