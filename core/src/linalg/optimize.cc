#include "bnn/linalg/optimize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include <Eigen/Eigenvalues>

namespace bnn {
namespace {

constexpr double kC1 = 1e-4;  // sufficient decrease
constexpr double kC2 = 0.9;   // curvature (quasi-Newton value)

}  // namespace

Quadrature GaussHermite(int n) {
  // Jacobi matrix of the monic probabilists' Hermite polynomials:
  // He_{k+1} = x He_k - k He_{k-1}, off-diagonal sqrt(k).
  Eigen::MatrixXd j = Eigen::MatrixXd::Zero(n, n);
  for (int k = 1; k < n; ++k) j(k, k - 1) = j(k - 1, k) = std::sqrt(k);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(j);
  Quadrature q;
  q.nodes = es.eigenvalues();
  q.weights = es.eigenvectors().row(0).transpose().cwiseAbs2();
  return q;
}

Lbfgs::Lbfgs(Objective f, Eigen::VectorXd x0, const Options& options)
    : objective_(std::move(f)), options_(options), x_(std::move(x0)) {}

Eigen::VectorXd Lbfgs::Direction() const {
  // Two-loop recursion: d = -H g with H the L-BFGS inverse Hessian.
  Eigen::VectorXd q = g_;
  const int m = static_cast<int>(s_.size());
  std::vector<double> alpha(m), rho(m);
  for (int i = m - 1; i >= 0; --i) {
    rho[i] = 1.0 / y_[i].dot(s_[i]);
    alpha[i] = rho[i] * s_[i].dot(q);
    q -= alpha[i] * y_[i];
  }
  if (m > 0) q *= s_.back().dot(y_.back()) / y_.back().squaredNorm();
  for (int i = 0; i < m; ++i) {
    const double b = rho[i] * y_[i].dot(q);
    q += (alpha[i] - b) * s_[i];
  }
  return -q;
}

bool Lbfgs::LineSearch(const Eigen::VectorXd& d, double* step, double* f_out,
                       Eigen::VectorXd* g_out) {
  const double f0 = f_;
  const double d0 = g_.dot(d);
  Eigen::VectorXd g(x_.size());
  int evals = 0;
  // Evaluates at a; false once the evaluation budget is spent.
  auto eval = [&](double a, double* f, double* slope) {
    if (evals++ >= options_.max_evaluations) return false;
    *f = objective_(x_ + a * d, &g);
    *slope = g.dot(d);
    return true;
  };
  auto accept = [&](double a, double f) {
    *step = a;
    *f_out = f;
    *g_out = g;
    return true;
  };
  auto sufficient = [&](double a, double f) {
    return std::isfinite(f) && f <= f0 + kC1 * a * d0;
  };
  // Alg. 3.6: `lo` satisfies sufficient decrease and has the lowest value
  // seen; the minimiser lies between lo and hi. Bisection steps.
  auto zoom = [&](double lo, double f_lo, double hi) {
    double f, slope;
    while (std::abs(hi - lo) > 1e-16 * std::max(1.0, std::abs(lo))) {
      const double mid = 0.5 * (lo + hi);
      if (!eval(mid, &f, &slope)) break;
      if (!sufficient(mid, f) || f >= f_lo) {
        hi = mid;
        continue;
      }
      if (std::abs(slope) <= -kC2 * d0) return accept(mid, f);
      if (slope * (hi - lo) >= 0) hi = lo;
      lo = mid;
      f_lo = f;
    }
    // Out of budget or bracket: take lo if it improved at all.
    if (lo > 0 && f_lo < f0) {
      evals = 0;  // one more evaluation to refresh the gradient at lo
      if (eval(lo, &f, &slope)) return accept(lo, f);
    }
    return false;
  };
  // Alg. 3.5: expand until the interval brackets a strong-Wolfe point.
  double a_prev = 0, f_prev = f0;
  double a = *step;
  for (int i = 0;; ++i) {
    double f, slope;
    if (!eval(a, &f, &slope)) return false;
    if (!sufficient(a, f) || (i > 0 && f >= f_prev)) {
      return zoom(a_prev, f_prev, a);
    }
    if (std::abs(slope) <= -kC2 * d0) return accept(a, f);
    if (slope >= 0) return zoom(a, f, a_prev);
    a_prev = a;
    f_prev = f;
    a *= 2;
  }
}

Lbfgs::State Lbfgs::GetState() const {
  return {x_, g_, f_, started_, converged_, s_, y_};
}

absl::Status Lbfgs::SetState(State state) {
  const Eigen::Index n = x_.size();
  bool sizes_match = state.x.size() == n &&
                     (!state.started || state.g.size() == n) &&
                     state.s.size() == state.y.size() &&
                     static_cast<int>(state.s.size()) <= options_.memory;
  for (size_t i = 0; sizes_match && i < state.s.size(); ++i) {
    sizes_match = state.s[i].size() == n && state.y[i].size() == n;
  }
  if (!sizes_match) {
    return absl::InvalidArgumentError(
        absl::StrCat("L-BFGS state does not fit a problem of ", n,
                     " variables and ", options_.memory, " correction pairs"));
  }
  x_ = std::move(state.x);
  g_ = std::move(state.g);
  f_ = state.f;
  started_ = state.started;
  converged_ = state.converged;
  s_ = std::move(state.s);
  y_ = std::move(state.y);
  return absl::OkStatus();
}

absl::StatusOr<bool> Lbfgs::Iterate() {
  if (!started_) {
    g_.resize(x_.size());
    f_ = objective_(x_, &g_);
    if (!std::isfinite(f_) || !g_.allFinite()) {
      return absl::InvalidArgumentError(
          "L-BFGS: the objective is not finite at the starting point");
    }
    started_ = true;
  }
  if (converged_) return false;
  if (g_.cwiseAbs().maxCoeff() <=
      options_.gradient_tolerance * std::max(1.0, std::abs(f_))) {
    converged_ = true;
    return false;
  }
  Eigen::VectorXd d = Direction();
  if (g_.dot(d) >= 0) {  // not a descent direction: restart
    s_.clear();
    y_.clear();
    d = -g_;
  }
  double step = s_.empty() ? std::min(1.0, 1.0 / g_.norm()) : 1.0;
  double f_new;
  Eigen::VectorXd g_new;
  if (!LineSearch(d, &step, &f_new, &g_new)) {
    if (s_.empty()) {
      converged_ = true;  // no decrease along -g at machine precision
      return false;
    }
    s_.clear();  // retry from steepest descent next iteration
    y_.clear();
    return true;
  }
  const Eigen::VectorXd s = step * d;
  const Eigen::VectorXd y = g_new - g_;
  x_ += s;
  const double f_old = f_;
  f_ = f_new;
  g_ = g_new;
  if (s.dot(y) > 1e-300) {
    s_.push_back(s);
    y_.push_back(y);
    if (static_cast<int>(s_.size()) > options_.memory) {
      s_.pop_front();
      y_.pop_front();
    }
  }
  if (f_old - f_ <= 1e-15 * std::max(1.0, std::abs(f_))) converged_ = true;
  return true;
}

}  // namespace bnn
