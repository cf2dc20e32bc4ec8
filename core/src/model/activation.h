// Internal: activation functions and their derivatives on Eigen blocks, for
// the Network (the only forward/backward pass: methods never run their own).
#ifndef BNN_MODEL_ACTIVATION_H_
#define BNN_MODEL_ACTIVATION_H_

#include "bnn/model/model_spec.h"

namespace bnn {

template <typename In, typename Out>
void Activate(Activation a, const In& z, Out&& out) {
  using T = typename In::Scalar;
  switch (a) {
    case Activation::kRelu:
      out = z.cwiseMax(T(0));
      return;
    case Activation::kTanh:
      out = z.array().tanh().matrix();
      return;
    case Activation::kLeakyTanh:
      out = (z.array().tanh() + T(0.1) * z.array()).matrix();
      return;
    case Activation::kIdentity:
      out = z;
      return;
  }
}

// delta *= phi'(z), using the stored activation a = phi(z) where cheaper.
template <typename Z, typename A, typename D>
void MultiplyByDerivative(Activation act, const Z& z, const A& a, D&& delta) {
  using T = typename Z::Scalar;
  switch (act) {
    case Activation::kRelu:
      delta.array() *= (z.array() > T(0)).template cast<T>();
      return;
    case Activation::kTanh:
      delta.array() *= T(1) - a.array().square();
      return;
    case Activation::kLeakyTanh:
      // a = tanh z + 0.1 z  =>  phi' = 1 - (a - 0.1 z)^2 + 0.1.
      delta.array() *= T(1.1) - (a.array() - T(0.1) * z.array()).square();
      return;
    case Activation::kIdentity:
      return;
  }
}

}  // namespace bnn

#endif  // BNN_MODEL_ACTIVATION_H_
