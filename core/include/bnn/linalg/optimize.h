// Deterministic optimisation helpers: L-BFGS (Nocedal & Wright, Alg. 7.4 with
// a strong-Wolfe line search, Alg. 3.5/3.6) driven one iteration at a time,
// and Gauss-Hermite quadrature for expectations under N(0, 1).
#ifndef BNN_LINALG_OPTIMIZE_H_
#define BNN_LINALG_OPTIMIZE_H_

#include <deque>
#include <functional>

#include "absl/status/statusor.h"
#include <Eigen/Core>

namespace bnn {

// Nodes z_k and weights w_k (summing to 1) with
// E[f(Z)] ~= sum_k w_k f(z_k) for Z ~ N(0, 1), exact for polynomials of
// degree < 2n (Golub-Welsch on the probabilists' Hermite recurrence).
struct Quadrature {
  Eigen::VectorXd nodes;
  Eigen::VectorXd weights;
};
Quadrature GaussHermite(int n);

class Lbfgs {
 public:
  // f(x, grad) returns the objective and writes its gradient.
  using Objective =
      std::function<double(const Eigen::VectorXd& x, Eigen::VectorXd* grad)>;

  struct Options {
    // Correction pairs kept.
    int memory = 10;
    // Converged when |grad|_inf <= gradient_tolerance * max(1, |f|).
    double gradient_tolerance = 1e-10;
    // Objective evaluations allowed per line search.
    int max_evaluations = 40;
  };

  Lbfgs(Objective f, Eigen::VectorXd x0, const Options& options);

  // One iteration: direction, line search, update. Returns false once
  // converged (or when no decrease is possible at machine precision), true
  // if it moved. Fails only if the objective is not finite at the start.
  absl::StatusOr<bool> Iterate();

  const Eigen::VectorXd& x() const { return x_; }
  double value() const { return f_; }
  const Eigen::VectorXd& gradient() const { return g_; }
  bool converged() const { return converged_; }

  // Everything later iterations depend on, for checkpoints: the iterate, the
  // objective and gradient there, and the correction pairs (oldest first).
  struct State {
    Eigen::VectorXd x, g;
    double f = 0;
    bool started = false;
    bool converged = false;
    std::deque<Eigen::VectorXd> s, y;
  };
  State GetState() const;
  // Continues from `state` (of an Lbfgs over the same objective and
  // options). InvalidArgument if its sizes do not match this problem's or it
  // holds more correction pairs than Options::memory.
  absl::Status SetState(State state);

 private:
  Eigen::VectorXd Direction() const;
  // Strong-Wolfe step along d from (x_, f_, g_); false if none was found.
  bool LineSearch(const Eigen::VectorXd& d, double* step, double* f,
                  Eigen::VectorXd* g);

  Objective objective_;
  Options options_;
  Eigen::VectorXd x_, g_;
  double f_ = 0;
  bool started_ = false;
  bool converged_ = false;
  std::deque<Eigen::VectorXd> s_, y_;
};

}  // namespace bnn

#endif  // BNN_LINALG_OPTIMIZE_H_
