// MC dropout and MAP: a step with dropout rate 0 is Adam on the plain
// network's gradient of the mean minibatch NLL plus weight decay; trained on
// a sine, MAP fits with no spread and MC dropout is uncertain.
#include "bnn/methods/dropout.h"

#include <cmath>
#include <numeric>

#include <Eigen/Dense>
#include <gtest/gtest.h>

#include "bnn/methods/method.h"
#include "bnn/methods/registry.h"
#include "bnn/model/network.h"
#include "bnn/posterior/posterior.h"
#include "bnn/predict/predictor.h"
#include "bnn/train/trainer.h"

namespace bnn {
namespace {

TEST(DropoutTest, RateZeroStepIsAdamOnThePlainNetworksGradient) {
  Rng data_rng(3);
  Dataset data;
  data.num_features = 2;
  for (int i = 0; i < 12; ++i) {
    const double a = data_rng.Normal(), b = data_rng.Normal();
    data.features.insert(data.features.end(), {a, b});
    data.targets.push_back(std::tanh(a) - 0.5 * b);
  }
  const ModelSpec spec =
      ModelSpec::ForTask(Task::kRegression, 2, 0, {5, 4}, Activation::kTanh);
  const Network<double> network(spec);
  // adam_epsilon = 1 keeps the first Adam step -lr g / (|g| + 1) sensitive
  // to the gradient's value, not only its sign.
  const ParamMap params = {{"learning_rate", "0.5"}, {"adam_epsilon", "1"},
                           {"weight_decay", "0.01"}, {"noise_precision", "3"},
                           {"batch_size", "7"},      {"dropout", "0"}};
  for (const char* name : {"map", "mc_dropout"}) {
    auto method = MethodRegistry::Builtin().Create(name, params);
    ASSERT_TRUE(method.ok()) << method.status();
    Rng rng(9);
    ASSERT_TRUE((*method)->Initialize(spec, data, rng).ok());
    Rng init(9);
    const Eigen::VectorXd theta0 = network.InitialWeights(init);
    const std::vector<int64_t> batch = {4, 0, 11, 7, 7, 2, 9};
    ASSERT_TRUE((*method)->Step(batch, rng).ok());
    const Eigen::VectorXd theta1 = (*method)->ExportPosterior()->mean();

    Eigen::MatrixXd x(7, 2);
    Eigen::VectorXd y(7);
    for (int n = 0; n < 7; ++n) {
      x.row(n) << data.row(batch[n])[0], data.row(batch[n])[1];
      y[n] = data.targets[batch[n]];
    }
    ForwardPass<double> pass;
    PerExampleGrads<double> grads;
    network.Forward(x, theta0, &pass);
    network.Backward(y, 3.0, theta0, pass, &grads, nullptr);
    const Eigen::MatrixXd j = grads.Materialize();
    const Eigen::VectorXd g = j.rowwise().sum() / 7 + 0.01 * theta0;
    // First Adam step: m^ = g, v^ = g^2.
    const Eigen::VectorXd want =
        theta0 - (0.5 * g.array() / (g.array().abs() + 1.0)).matrix();
    EXPECT_LT((theta1 - want).cwiseAbs().maxCoeff(), 1e-12) << name;
    EXPECT_GT((theta1 - theta0).cwiseAbs().maxCoeff(), 1e-3) << name;
  }
}

TEST(DropoutTest, MapFitsAndMcDropoutIsUncertain) {
  Rng rng(5);
  Dataset data;
  data.num_features = 1;
  for (int i = 0; i < 200; ++i) {
    const double x = rng.Uniform(-2, 2);
    data.features.push_back(x);
    data.targets.push_back(std::sin(2 * x) + 0.1 * rng.Normal());
  }
  TrainRequest r;
  r.hidden_sizes = {50};
  r.activations = {Activation::kTanh};
  r.params = {{"batch_size", "32"}, {"learning_rate", "0.01"}};
  r.options.epochs = 800;
  const std::vector<double> grid = {-1.5, 0.0, 1.0};
  PredictOptions o;
  o.num_samples = 64;
  for (const char* method : {"map", "mc_dropout"}) {
    r.method = method;
    auto fit = Train(r, data, MethodRegistry::Builtin());
    ASSERT_TRUE(fit.ok()) << method << ": " << fit.status();
    EXPECT_EQ(fit->posterior->family(), "dropout");
    auto p = (*Predictor::Create(std::make_shared<Snapshot>(*fit)))
                 ->Predict(grid, 3, o);
    ASSERT_TRUE(p.ok());
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(p->mean[i], std::sin(2 * grid[i]), 0.15) << method << i;
      if (std::string(method) == "map") {
        // Every sample is the same network: zero up to the rounding of the
        // sample moments (3e-34 under the sanitizer build's -O1).
        EXPECT_LE(p->epistemic_variance[i], 1e-24);
      } else {
        EXPECT_GT(p->epistemic_variance[i], 0.0);
      }
    }
  }
  r.method = "map";
  r.params["dropout"] = "0.5";
  EXPECT_EQ(Train(r, data, MethodRegistry::Builtin()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace bnn
