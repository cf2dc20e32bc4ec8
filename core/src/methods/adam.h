// Internal: the Adam optimiser state (Kingma & Ba 2015) shared by the
// methods that step with it (BBB's mean and rho, MC dropout's weights).
#ifndef BNN_METHODS_ADAM_H_
#define BNN_METHODS_ADAM_H_

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include <Eigen/Core>

#include "methods/method_state.h"

namespace bnn::internal {

struct AdamOptions {
  double learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

// First and second moment EMAs of one parameter vector.
class AdamState {
 public:
  void Reset(int64_t dim) {
    m_.setZero(dim);
    v_.setZero(dim);
  }

  // The moments as "<prefix>.adam_m" and "<prefix>.adam_v" (the step
  // counter t is the caller's).
  void SaveState(absl::string_view prefix, StateWriter* w) const {
    w->Array(absl::StrCat(prefix, ".adam_m"), m_);
    w->Array(absl::StrCat(prefix, ".adam_v"), v_);
  }
  // After Reset(dim).
  absl::Status LoadState(absl::string_view prefix, const StateReader& r) {
    absl::Status status = r.Array(absl::StrCat(prefix, ".adam_m"), &m_);
    if (!status.ok()) return status;
    return r.Array(absl::StrCat(prefix, ".adam_v"), &v_);
  }

  // param -= lr m^ / (sqrt(v^) + eps) with the bias-corrected moments
  // m^ = m / (1 - beta1^t), v^ = v / (1 - beta2^t); t counts steps from 1.
  void Step(const AdamOptions& o, int64_t t, const Eigen::VectorXd& grad,
            Eigen::VectorXd* param) {
    m_ = o.beta1 * m_ + (1 - o.beta1) * grad;
    v_ = o.beta2 * v_ + (1 - o.beta2) * grad.cwiseAbs2();
    const double c1 = 1 - std::pow(o.beta1, static_cast<double>(t));
    const double c2 = 1 - std::pow(o.beta2, static_cast<double>(t));
    *param -= (o.learning_rate * (m_ / c1).array() /
               ((v_ / c2).array().sqrt() + o.epsilon))
                  .matrix();
  }

 private:
  Eigen::VectorXd m_, v_;
};

}  // namespace bnn::internal

#endif  // BNN_METHODS_ADAM_H_
