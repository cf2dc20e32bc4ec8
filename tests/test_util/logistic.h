// Synthetic Bayesian logistic-regression problems shared by the method tests.
#ifndef BNN_TESTS_TEST_UTIL_LOGISTIC_H_
#define BNN_TESTS_TEST_UTIL_LOGISTIC_H_

#include <cmath>
#include <string>

#include "bnn/data/dataset.h"
#include "bnn/methods/registry.h"
#include "bnn/random.h"
#include "bnn/train/trainer.h"

namespace bnn::testing {

// n rows, p features. spectrum == false: independent N(0, 1) features;
// true: feature j has scale 0.7^j plus a shared factor, so the curvature has
// a decaying spectrum (like the LIBSVM sets SLANG uses).
inline Dataset LogisticData(int n, int p, bool spectrum, uint64_t seed) {
  Rng rng(seed);
  Dataset d;
  d.task = Task::kBinary;
  d.num_classes = 2;
  d.class_values = {0, 1};
  d.num_features = p;
  for (int i = 0; i < n; ++i) {
    double z = 0.2;
    const double common = rng.Normal();
    for (int j = 0; j < p; ++j) {
      const double x = spectrum ? rng.Normal() * std::pow(0.7, j) + 0.5 * common
                                : rng.Normal();
      d.features.push_back(x);
      z += 0.8 * x * (j % 2 ? -1 : 1);
    }
    d.targets.push_back(rng.Uniform() < 1 / (1 + std::exp(-z)) ? 1 : 0);
  }
  return d;
}

// Trains `method` on raw (unstandardised) features with unit priors.
inline absl::StatusOr<Snapshot> TrainLogistic(const std::string& method,
                                              const Dataset& data, int epochs,
                                              ParamMap params = {}) {
  TrainRequest r;
  r.method = method;
  r.params = std::move(params);
  r.params["standardize"] = "false";
  r.params.emplace("prior_precision", "1");
  r.params.emplace("bias_prior_precision", "1");
  r.options.epochs = epochs;
  r.options.seed = 3;
  return Train(r, data, MethodRegistry::Builtin());
}

// Full-batch natural-gradient settings with decay (Mishkin et al. 2018,
// Sec. 4.1, App. E).
inline ParamMap FullBatch(int n, int samples) {
  return {{"batch_size", std::to_string(n)},
          {"mc_samples", std::to_string(samples)},
          {"learning_rate", "0.2"},
          {"beta", "0.2"},
          {"decay", "0.51"}};
}

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_LOGISTIC_H_
