// The natural-gradient Gaussian baselines converge to the optimal Gaussian
// (exact_full / exact_diag): VON exactly (its fixed point is the ELBO's
// stationary point), VOGN up to the empirical-Fisher bias, which vanishes
// as N grows.
#include "bnn/methods/vogn.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/posterior/posterior.h"
#include "bnn/predict/evaluation.h"

#include "tests/test_util/logistic.h"
#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::bnn::testing::FullBatch;
using ::bnn::testing::LogisticData;
using ::bnn::testing::Msg;
using ::bnn::testing::TrainLogistic;
using ::testing::HasSubstr;

double KlToExact(const std::string& method, const std::string& exact,
                 const Dataset& data, int epochs, int samples) {
  auto reference = TrainLogistic(exact, data, 500);
  auto fitted =
      TrainLogistic(method, data, epochs, FullBatch(data.num_rows(), samples));
  EXPECT_TRUE(reference.ok() && fitted.ok());
  auto kl = SymmetricKl(*fitted->posterior, *reference->posterior);
  EXPECT_TRUE(kl.ok()) << kl.status();
  return *kl;
}

TEST(VognTest, VonFullConvergesToExactFull) {
  EXPECT_LT(KlToExact("von_full", "exact_full", LogisticData(200, 2, false, 7),
                      500, 50),
            1e-3);
}

TEST(VognTest, VonDiagConvergesToExactDiag) {
  EXPECT_LT(KlToExact("von_diag", "exact_diag", LogisticData(200, 2, false, 7),
                      500, 50),
            1e-3);
}

TEST(VognTest, VognFullConvergesToExactFullWhenTheEmpiricalFisherIsAccurate) {
  // The EF differs from the expected Hessian by O(1/N): at N = 200 the KL is
  // ~1e-2 (measured), at N = 10000 below 1e-3.
  EXPECT_LT(KlToExact("vogn_full", "exact_full",
                      LogisticData(10000, 2, false, 7), 400, 40),
            1e-3);
}

TEST(VognTest, RefusesModelsItCannotHandle) {
  Dataset data = LogisticData(50, 3, false, 1);
  TrainRequest r;
  r.method = "von_full";
  r.hidden_sizes = {4};
  auto s = Train(r, data, MethodRegistry::Builtin());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s.status()), HasSubstr("vogn_full"));
  r.method = "vogn_full";
  r.hidden_sizes = {2000};  // 2000 * 4 + 2001 parameters > 4096
  s = Train(r, data, MethodRegistry::Builtin());
  EXPECT_THAT(Msg(s.status()), HasSubstr("limit is 4096"));
}

}  // namespace
}  // namespace bnn
