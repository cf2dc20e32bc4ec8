// The check shared by the targets that decode snapshots (snapshot_fuzz,
// store_fuzz): a snapshot that decoded must serve.
#ifndef BNN_TESTS_FUZZ_SERVING_CHECK_H_
#define BNN_TESTS_FUZZ_SERVING_CHECK_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"

#include "bnn/check.h"
#include "bnn/io/snapshot.h"
#include "bnn/predict/predictor.h"

#include "tests/fuzz/fuzz_util.h"

namespace bnn::fuzz {

// The result of predicting with a snapshot that decoded: OK, or a refusal
// of a non-finite prediction (Internal) or, unless `in_range`, of inputs
// whose standardisation overflows (InvalidArgument).
inline void CheckPrediction(const absl::StatusOr<Prediction>& prediction,
                            bool in_range) {
  const absl::Status& status = prediction.status();
  if (in_range) {
    CheckStatus(status, {absl::StatusCode::kInternal}, "Predict");
  } else {
    CheckStatus(
        status,
        {absl::StatusCode::kInternal, absl::StatusCode::kInvalidArgument},
        "Predict");
  }
  if (absl::IsInternal(status)) {
    BNN_CHECK(absl::StrContains(status.message(), "non-finite prediction"));
  }
  if (absl::IsInvalidArgument(status)) {
    BNN_CHECK(absl::StrContains(status.message(), "out of range"));
  }
}

// A Predictor of `snapshot` predicts a row of zeros (which a snapshot with
// tiny standard deviations may refuse as out of range) and the row of its
// training means (which standardises to zeros and so must be served).
inline void CheckServes(const std::shared_ptr<const Snapshot>& snapshot) {
  PredictorOptions options;
  options.max_samples = 4;
  options.cache_bytes = 0;
  absl::StatusOr<std::unique_ptr<Predictor>> predictor =
      Predictor::Create(snapshot, options);
  CheckStatus(predictor.status(), {absl::StatusCode::kResourceExhausted},
              "Predictor::Create");
  if (!predictor.ok()) return;
  PredictOptions predict;
  predict.num_samples = 3;
  predict.seed = 1;
  const std::vector<double> zeros(snapshot->model.input_dim, 0.0);
  CheckPrediction((*predictor)->Predict(zeros, 1, predict), false);
  CheckPrediction(
      (*predictor)->Predict(snapshot->standardization.feature_mean, 1, predict),
      true);
}

}  // namespace bnn::fuzz

#endif  // BNN_TESTS_FUZZ_SERVING_CHECK_H_
