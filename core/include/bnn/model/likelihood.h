// Per-example negative log-likelihoods of the network output f and their
// gradients d(-log p)/df. Shared by training (the backward pass), the
// predictive and the metrics so that every place uses the same formulas.
#ifndef BNN_MODEL_LIKELIHOOD_H_
#define BNN_MODEL_LIKELIHOOD_H_

#include <algorithm>
#include <cmath>

#include "bnn/model/model_spec.h"
#include "bnn/random.h"

namespace bnn {

inline constexpr double kLog2Pi = 1.8378770664093454836;

// log(1 + exp(x)) without overflow.
template <typename T>
T Softplus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

template <typename T>
T Sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// -log p(y | f) for one example. `f` points to the output_dim outputs of the
// network; `y` is the target value (Gaussian) or class index (others);
// `noise_precision` is tau (Gaussian only). If `grad` is non-null it receives
// d(-log p)/df (output_dim values).
template <typename T>
T NegLogLikelihood(Likelihood likelihood, const T* f, int output_dim, T y,
                   T noise_precision, T* grad) {
  switch (likelihood) {
    case Likelihood::kGaussian: {
      const T r = f[0] - y;
      if (grad) grad[0] = noise_precision * r;
      return T(0.5) *
             (noise_precision * r * r - std::log(noise_precision) + T(kLog2Pi));
    }
    case Likelihood::kBernoulli: {
      // y in {0, 1}; f is the logit.
      if (grad) grad[0] = Sigmoid(f[0]) - y;
      return Softplus(f[0]) - y * f[0];
    }
    case Likelihood::kCategorical: {
      const T m = *std::max_element(f, f + output_dim);
      T z = 0;
      for (int c = 0; c < output_dim; ++c) z += std::exp(f[c] - m);
      const T log_z = m + std::log(z);
      const int label = static_cast<int>(y);
      if (grad) {
        for (int c = 0; c < output_dim; ++c) grad[c] = std::exp(f[c] - log_z);
        grad[label] -= T(1);
      }
      return log_z - f[label];
    }
  }
  return T(0);
}

// A target drawn from the model's predictive p(y | f): N(f, 1/tau), a
// Bernoulli(sigmoid(f)) label or a class from softmax(f). Gradients at such
// targets give the true Fisher (NNG footnote 1; K-FAC).
template <typename T>
T SampleTarget(Likelihood likelihood, const T* f, int output_dim,
               T noise_precision, Rng& rng) {
  switch (likelihood) {
    case Likelihood::kGaussian:
      return f[0] + T(rng.Normal()) / std::sqrt(noise_precision);
    case Likelihood::kBernoulli:
      return rng.Uniform() < Sigmoid(f[0]) ? T(1) : T(0);
    case Likelihood::kCategorical: {
      const T m = *std::max_element(f, f + output_dim);
      T z = 0;
      for (int c = 0; c < output_dim; ++c) z += std::exp(f[c] - m);
      T u = T(rng.Uniform()) * z;
      for (int c = 0; c < output_dim; ++c) {
        u -= std::exp(f[c] - m);
        if (u <= 0) return T(c);
      }
      return T(output_dim - 1);
    }
  }
  return T(0);
}

// d^2(-log p)/df^2 (output_dim x output_dim, row-major into `hess`): tau for
// the Gaussian, s (1 - s) for the Bernoulli, diag(p) - p p^T for the
// categorical. It does not depend on y for these likelihoods.
template <typename T>
void NegLogLikelihoodHessian(Likelihood likelihood, const T* f, int output_dim,
                             T noise_precision, T* hess) {
  switch (likelihood) {
    case Likelihood::kGaussian:
      hess[0] = noise_precision;
      return;
    case Likelihood::kBernoulli: {
      const T s = Sigmoid(f[0]);
      hess[0] = s * (T(1) - s);
      return;
    }
    case Likelihood::kCategorical: {
      const T m = *std::max_element(f, f + output_dim);
      T z = 0;
      for (int c = 0; c < output_dim; ++c) z += std::exp(f[c] - m);
      for (int a = 0; a < output_dim; ++a) {
        const T pa = std::exp(f[a] - m) / z;
        for (int b = 0; b < output_dim; ++b) {
          const T pb = std::exp(f[b] - m) / z;
          hess[a * output_dim + b] = (a == b ? pa : T(0)) - pa * pb;
        }
      }
      return;
    }
  }
}

}  // namespace bnn

#endif  // BNN_MODEL_LIKELIHOOD_H_
