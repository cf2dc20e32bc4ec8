#include "tests/server/server_test_util.h"

#include <gtest/gtest.h>

#include "bnn/methods/registry.h"
#include "bnn/random.h"
#include "bnn/train/trainer.h"

namespace bnn::server::testutil {

Dataset CubicDataset(int num_rows, uint64_t seed) {
  Dataset data;
  data.num_features = 1;
  Rng rng(seed);
  for (int i = 0; i < num_rows; ++i) {
    const double x = rng.Uniform(-4.0, 4.0);
    data.features.push_back(x);
    data.targets.push_back(x * x * x + 3.0 * rng.Normal());
  }
  return data;
}

Snapshot TinySnapshot(uint64_t seed) {
  TrainRequest request;
  request.method = "slang";
  request.hidden_sizes = {4};
  request.params = {{"batch_size", "10"}, {"epochs", "1"}};
  request.options.seed = seed;
  request.dataset_id = "ds-00000000000000aa";
  request.dataset_version = 2;
  absl::StatusOr<Snapshot> snapshot =
      Train(request, CubicDataset(20), MethodRegistry::Builtin());
  EXPECT_TRUE(snapshot.ok()) << snapshot.status();
  return *std::move(snapshot);
}

}  // namespace bnn::server::testutil
