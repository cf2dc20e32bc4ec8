#include "bnn/predict/scores.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/methods/options.h"
#include "bnn/status.h"

namespace bnn {

absl::Status EvaluateOptions::Validate() const {
  BNN_RETURN_IF_ERROR(CheckIntRange("num_samples", num_samples, 1, 1 << 20));
  return CheckIntRange("ece_bins", ece_bins, 1, 1000);
}

namespace {

// OOD rows score positive; the labelled rows negative.
double OodAuroc(absl::Span<const double> in_scores,
                absl::Span<const double> ood_scores) {
  std::vector<double> scores(in_scores.begin(), in_scores.end());
  scores.insert(scores.end(), ood_scores.begin(), ood_scores.end());
  std::unique_ptr<bool[]> positive(new bool[scores.size()]);
  for (size_t i = 0; i < scores.size(); ++i) {
    positive[i] = i >= in_scores.size();
  }
  return Auroc(scores, absl::MakeConstSpan(positive.get(), scores.size()));
}

absl::StatusOr<Evaluation> EvaluateImpl(const Predictor& predictor,
                                        absl::Span<const double> rows,
                                        absl::Span<const double> targets,
                                        int64_t num_rows,
                                        absl::Span<const double> ood_rows,
                                        int64_t num_ood_rows,
                                        const EvaluateOptions& options) {
  BNN_RETURN_IF_ERROR(options.Validate());
  const Snapshot& snap = predictor.snapshot();
  const bool classification = IsClassification(snap.task);
  if (num_rows < 1 || static_cast<int64_t>(targets.size()) != num_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("evaluation needs at least one row and one target per "
                     "row; got ",
                     num_rows, " rows and ", targets.size(), " targets"));
  }
  if (num_ood_rows > 0 && !classification) {
    return absl::InvalidArgumentError(
        "out-of-distribution rows need a classifier (their AUROC is of "
        "entropy and mutual information); this snapshot is a regression "
        "model");
  }
  const int num_classes = static_cast<int>(snap.class_values.size());
  if (classification) {
    for (int64_t i = 0; i < num_rows; ++i) {
      const double y = targets[i];
      if (!(y >= 0 && y < num_classes) || y != static_cast<int>(y)) {
        return absl::InvalidArgumentError(
            absl::StrCat("target ", i, " = ", y,
                         " is not a class index in [0, ", num_classes, ")"));
      }
    }
  }
  PredictOptions predict;
  predict.num_samples = options.num_samples;
  predict.seed = options.seed;
  predict.cache_samples = options.cache_samples;
  predict.interrupt = options.interrupt;
  // One draw for the labelled and the OOD rows.
  BNN_ASSIGN_OR_RETURN(predict.samples, predictor.DrawSamples(predict));
  predict.per_sample = !classification;
  BNN_ASSIGN_OR_RETURN(const Prediction p,
                       predictor.Predict(rows, num_rows, predict));

  Evaluation out;
  out.num_rows = num_rows;
  out.num_samples = p.num_samples;
  if (!classification) {
    // The model's noise precision is in standardised target units.
    const double target_std = snap.standardization.target_std;
    const double tau = snap.noise_precision / (target_std * target_std);
    out.rmse = Rmse(p.mean, targets);
    out.log_likelihood = GaussianMixtureLogLikelihood(
        p.sample_outputs, p.num_samples, targets, tau);
    out.nll = -*out.log_likelihood;
    return out;
  }
  out.nll = LogLoss(p.probabilities, num_classes, targets);
  out.accuracy = Accuracy(p.probabilities, num_classes, targets);
  out.brier = Brier(p.probabilities, num_classes, targets);
  out.reliability = ReliabilityDiagram(p.probabilities, num_classes, targets,
                                       options.ece_bins);
  out.ece = ExpectedCalibrationError(out.reliability);
  if (num_ood_rows > 0) {
    predict.per_sample = false;
    BNN_ASSIGN_OR_RETURN(const Prediction ood,
                         predictor.Predict(ood_rows, num_ood_rows, predict));
    out.ood_rows = num_ood_rows;
    out.auroc_entropy = OodAuroc(p.entropy, ood.entropy);
    out.auroc_mutual_information =
        OodAuroc(p.mutual_information, ood.mutual_information);
  }
  return out;
}

}  // namespace

absl::StatusOr<Evaluation> Evaluate(const Predictor& predictor,
                                    absl::Span<const double> rows,
                                    absl::Span<const double> targets,
                                    int64_t num_rows,
                                    absl::Span<const double> ood_rows,
                                    int64_t num_ood_rows,
                                    const EvaluateOptions& options) {
  return FailOnAllocationError("evaluation", [&] {
    return EvaluateImpl(predictor, rows, targets, num_rows, ood_rows,
                        num_ood_rows, options);
  });
}

MemoryEstimate EstimateEvaluateMemory(const Predictor& predictor,
                                      int64_t num_rows, int64_t num_ood_rows,
                                      const EvaluateOptions& options) {
  const bool classification = IsClassification(predictor.snapshot().task);
  PredictOptions predict;
  predict.num_samples = options.num_samples;
  predict.per_sample = !classification;
  // The labelled rows' prediction: the draw, a chunk's forward pass and
  // its arrays.
  const MemoryEstimate labelled = predictor.EstimateMemory(num_rows, predict);
  MemoryEstimate e = labelled;
  if (num_ood_rows > 0) {
    // Then the OOD rows' prediction with the same draw (counted in it),
    // while the labelled rows' arrays are kept, and both sets' scores
    // copied for the AUROC: the peak is the larger of the two steps.
    predict.per_sample = false;
    MemoryEstimate during_ood;
    during_ood.Add("labelled rows' prediction arrays", labelled.kept_bytes);
    during_ood.Add("OOD rows: ",
                   predictor.EstimateMemory(num_ood_rows, predict));
    during_ood.Add(
        "AUROC scores and labels",
        MulBytes({AddBytes(num_rows, num_ood_rows), sizeof(double) + 1}));
    if (during_ood.bytes > e.bytes) e = during_ood;
  }
  e.kept_bytes = 0;
  const int64_t kept =
      MulBytes({std::max(options.ece_bins, 1), sizeof(ReliabilityBin)});
  e.Add("reliability bins", kept);
  e.kept_bytes = kept;
  return e;
}

}  // namespace bnn
