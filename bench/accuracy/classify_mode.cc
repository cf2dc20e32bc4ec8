// bnn-experiment classify: one seeded training run of a classifier on a
// given train/test pair (the BALI paper's F-MNIST protocol, Ritter et al.
// 2021, Sec. 5.3, App. H.3: the provided 60k/10k split, 2 x 256 leaky tanh),
// then on the test set from the Monte Carlo predictive with --test-samples
// samples:
//   accuracy, nll (nats), ece (15 equal-width confidence bins), brier,
// the reliability diagram's bins and, with --eval-every K, a learning curve:
// test NLL and accuracy (and, with --curve-train-rows, the NLL on random
// training rows) after every K steps, as in the paper's Fig. 2 (§5.4).
#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

#include "bnn/io/file.h"
#include "bnn/random.h"
#include "bnn/status.h"

#include "bench/accuracy/classification.h"
#include "bench/accuracy/experiment.h"
#include "bench/accuracy/modes.h"
#include "bench/accuracy/scoring.h"

namespace bnn::experiment {
namespace {

Json ReliabilityJson(const std::vector<ReliabilityBin>& bins) {
  Json lower = Json::array(), upper = Json::array(), count = Json::array(),
       confidence = Json::array(), accuracy = Json::array();
  for (const ReliabilityBin& b : bins) {
    lower.push_back(b.lower);
    upper.push_back(b.upper);
    count.push_back(b.count);
    confidence.push_back(b.confidence);
    accuracy.push_back(b.accuracy);
  }
  return {{"bins", bins.size()},
          {"binning",
           "top-class confidence, equal-width bins (b/B, (b+1)/B]; "
           "ece = sum_b count_b |accuracy_b - confidence_b| / n"},
          {"lower", std::move(lower)},
          {"upper", std::move(upper)},
          {"count", std::move(count)},
          {"confidence", std::move(confidence)},
          {"accuracy", std::move(accuracy)}};
}

// Loads the test set of --test-idx or --test-csv in the training set's
// label space.
absl::StatusOr<Dataset> ReadTestSet(const FlagSet& flags,
                                    const ClassifierSetup& setup,
                                    std::string* source) {
  if (flags.Has("test-idx") == flags.Has("test-csv")) {
    return absl::InvalidArgumentError(
        "give the test set as exactly one of --test-idx and --test-csv");
  }
  Dataset test;
  if (flags.Has("test-idx")) {
    *source = flags.Get("test-idx");
    BNN_ASSIGN_OR_RETURN(const IdxFiles files,
                         ParseIdxFiles("test-idx", *source, true));
    BNN_ASSIGN_OR_RETURN(test, ReadIdxSet(files, setup.idx_scale));
  } else {
    *source = flags.Get("test-csv");
    BNN_ASSIGN_OR_RETURN(CsvSet csv,
                         ReadCsvSet(*source, flags.Get("target"), false));
    test = std::move(csv.data);
  }
  if (test.num_features != setup.train.num_features) {
    return absl::InvalidArgumentError(
        absl::StrCat(*source, " has ", test.num_features,
                     " features; the training set ", setup.train.num_features));
  }
  BNN_RETURN_IF_ERROR(MatchClasses(setup.train.class_values, &test));
  return test;
}

// Passes over the training set after the snapshot's steps (fractional), from
// the method's batch_size; NaN for a method without one.
double Epochs(const Snapshot& s) {
  int64_t batch = 0;
  const auto it = s.params.find("batch_size");
  if (it == s.params.end() || !absl::SimpleAtoi(it->second, &batch) ||
      batch < 1 || s.training.num_train < 1) {
    return std::nan("");
  }
  const int64_t n = s.training.num_train;
  const int64_t per_epoch = (n + std::min(batch, n) - 1) / std::min(batch, n);
  return static_cast<double>(s.training.steps) / per_epoch;
}

// The learning curve kept beside a checkpoint: its points up to the
// checkpoint's step (a crash after the curve was written and before the
// checkpoint was leaves later points, which the resumed run recomputes) and
// the steps the run was resumed at.
struct CurveState {
  Json curve;
  Json resumed_at_steps = Json::array();
};

std::string CurvePath(const std::string& checkpoint_path) {
  return absl::StrCat(checkpoint_path, ".curve.json");
}

absl::StatusOr<CurveState> ReadCurveState(const std::string& path,
                                          int64_t step) {
  BNN_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  Json state = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("curve") ||
      !state["curve"].contains("step") || !state["curve"]["step"].is_array() ||
      !state.contains("resumed_at_steps")) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a learning-curve state file"));
  }
  CurveState out{state["curve"], state["resumed_at_steps"]};
  size_t keep = 0;
  for (const Json& s : out.curve["step"]) {
    if (!s.is_number_integer()) {
      return absl::DataLossError(
          absl::StrCat(path, ": a learning-curve step is not an integer"));
    }
    if (s.get<int64_t>() <= step) ++keep;
  }
  for (auto& [key, value] : out.curve.items()) {
    if (value.is_array()) value.get_ref<Json::array_t&>().resize(keep);
  }
  return out;
}

}  // namespace

void DeclareClassifyFlags(FlagSet* flags) {
  // §5.4 evaluates with 128 posterior samples or dropout masks.
  DeclareCommonFlags(128, flags);
  DeclareClassifierFlags(flags);
  flags->Flag("test-idx", "test set as IDX IMAGES:LABELS")
      .Flag("test-csv", "test set as CSV with the same columns as --csv")
      .Flag("eval-every", "learning curve: evaluate every K steps; 0 = none",
            "0")
      .Flag("curve-samples", "posterior samples per learning-curve point", "32")
      .Flag("curve-train-rows",
            "learning curve: also the NLL on this many random training rows "
            "(the paper uses 10000); 0 = test set only",
            "0")
      .Flag("checkpoint",
            "keep the run's state in this file (and FILE.curve.json) every "
            "--checkpoint-seconds of training (or --checkpoint-steps steps); "
            "a rerun of the same command continues from it; both are deleted "
            "when the run finishes")
      .Flag("checkpoint-seconds", "training seconds between checkpoints", "600")
      .Flag("checkpoint-steps", "steps between checkpoints; 0 = by time", "0")
      .Flag("stop-at-step",
            "stop after the first checkpoint at or beyond this step, as a "
            "preempted run would (a test of resuming); 0 = never",
            "0");
}

absl::Status RunClassify(const FlagSet& flags, const RunInfo& info) {
  const auto start = std::chrono::steady_clock::now();
  BNN_ASSIGN_OR_RETURN(const ClassifierSetup setup,
                       ParseClassifierSetup(flags));
  const CommonOptions& common = setup.common;
  std::string test_source;
  BNN_ASSIGN_OR_RETURN(const Dataset test,
                       ReadTestSet(flags, setup, &test_source));
  BNN_ASSIGN_OR_RETURN(const int64_t eval_every,
                       flags.GetInt("eval-every", 0, int64_t{1} << 30));
  BNN_ASSIGN_OR_RETURN(const int64_t curve_samples,
                       flags.GetInt("curve-samples", 1, 4096));
  BNN_ASSIGN_OR_RETURN(
      const int64_t curve_train_rows,
      flags.GetInt("curve-train-rows", 0, setup.train.num_rows()));

  const std::string checkpoint_path = flags.Get("checkpoint");
  BNN_ASSIGN_OR_RETURN(const int64_t checkpoint_seconds,
                       flags.GetInt("checkpoint-seconds", 1, 24 * 3600));
  BNN_ASSIGN_OR_RETURN(const int64_t checkpoint_steps,
                       flags.GetInt("checkpoint-steps", 0, int64_t{1} << 30));
  BNN_ASSIGN_OR_RETURN(const int64_t stop_at_step,
                       flags.GetInt("stop-at-step", 0, int64_t{1} << 30));
  if (checkpoint_path.empty() &&
      (flags.Has("checkpoint-steps") || flags.Has("stop-at-step"))) {
    return absl::InvalidArgumentError(
        "--checkpoint-steps and --stop-at-step need --checkpoint");
  }
  std::optional<Checkpoint> resume;
  std::optional<CurveState> resumed_curve;
  if (!checkpoint_path.empty()) {
    absl::StatusOr<Checkpoint> checkpoint = ReadCheckpointFile(checkpoint_path);
    if (checkpoint.ok()) {
      resume = *std::move(checkpoint);
      BNN_ASSIGN_OR_RETURN(
          resumed_curve,
          ReadCurveState(CurvePath(checkpoint_path), resume->trainer.step));
      resumed_curve->resumed_at_steps.push_back(resume->trainer.step);
      std::cerr << "resuming from " << checkpoint_path << " at step "
                << resume->trainer.step << std::endl;
    } else if (!absl::IsNotFound(checkpoint.status())) {
      return checkpoint.status();
    }
  }

  // A fixed random subset of training rows for the curve's training NLL.
  Dataset curve_train;
  if (curve_train_rows > 0) {
    Rng rng(StreamSeed(common.seed, 0, Stream::kTuning));
    std::vector<int64_t> rows(setup.train.num_rows());
    for (int64_t i = 0; i < setup.train.num_rows(); ++i) rows[i] = i;
    std::shuffle(rows.begin(), rows.end(), rng.engine());
    rows.resize(curve_train_rows);
    std::sort(rows.begin(), rows.end());
    curve_train = setup.train.Subset(rows);
  }

  const auto run = [&]() -> absl::StatusOr<SplitOutcome> {
    SplitOutcome outcome;
    const uint64_t predict_seed =
        StreamSeed(common.seed, 0, Stream::kPrediction);
    Json curve = {{"samples", curve_samples},
                  {"step", Json::array()},
                  {"epoch", Json::array()},
                  {"train_seconds", Json::array()},
                  {"train_minibatch_nll", Json::array()},
                  {"test_nll", Json::array()},
                  {"test_accuracy", Json::array()}};
    if (curve_train_rows > 0) {
      curve["train_rows"] = curve_train_rows;
      curve["train_nll"] = Json::array();
    }
    Json resumed_at_steps = Json::array();
    if (resumed_curve.has_value()) {
      curve = resumed_curve->curve;
      resumed_at_steps = resumed_curve->resumed_at_steps;
    }
    const auto observe = [&](const Snapshot& s) -> absl::Status {
      // Each point draws its own samples, seeded by its step.
      const uint64_t seed = Rng(predict_seed).Fork(s.training.steps).seed();
      BNN_ASSIGN_OR_RETURN(
          const Prediction p,
          PredictRows(s, test, static_cast<int>(curve_samples), seed));
      const ClassificationScores scores = ScoreProbabilities(p, test);
      curve["step"].push_back(s.training.steps);
      curve["epoch"].push_back(Epochs(s));
      curve["train_seconds"].push_back(s.training.seconds);
      curve["train_minibatch_nll"].push_back(s.training.final_loss);
      curve["test_nll"].push_back(scores.nll);
      curve["test_accuracy"].push_back(scores.accuracy);
      std::string line = absl::StrFormat(
          "[step %d] %.1f s training, test nll=%.4f accuracy=%.4f",
          s.training.steps, s.training.seconds, scores.nll, scores.accuracy);
      if (curve_train_rows > 0) {
        BNN_ASSIGN_OR_RETURN(
            const Prediction q,
            PredictRows(s, curve_train, static_cast<int>(curve_samples),
                        Rng(seed).Fork(1).seed()));
        const double train_nll = ScoreProbabilities(q, curve_train).nll;
        curve["train_nll"].push_back(train_nll);
        absl::StrAppendFormat(&line, " train nll=%.4f", train_nll);
      }
      std::cerr << line << std::endl;
      return absl::OkStatus();
    };
    std::function<absl::Status(const Snapshot&)> observer;
    if (eval_every > 0) observer = observe;
    ClassifierCheckpoints checkpoints;
    checkpoints.path = checkpoint_path;
    checkpoints.interval = absl::Seconds(checkpoint_seconds);
    checkpoints.every_steps = checkpoint_steps;
    checkpoints.stop_at_step = stop_at_step;
    checkpoints.resume = resume.has_value() ? &*resume : nullptr;
    checkpoints.before_write = [&](int64_t /*step*/) {
      const Json state = {{"curve", curve},
                          {"resumed_at_steps", resumed_at_steps}};
      return WriteFileAtomically(CurvePath(checkpoint_path), state.dump());
    };
    BNN_ASSIGN_OR_RETURN(
        const Snapshot snapshot,
        TrainClassifier(setup, StreamSeed(common.seed, 0, Stream::kTraining),
                        eval_every, std::move(observer), checkpoints));
    BNN_RETURN_IF_ERROR(MaybeSaveSnapshot(setup.save_snapshot, snapshot));
    if (!checkpoint_path.empty()) {
      BNN_RETURN_IF_ERROR(RemoveFile(checkpoint_path));
      BNN_RETURN_IF_ERROR(RemoveFile(CurvePath(checkpoint_path)));
    }
    if (!resumed_at_steps.empty()) {
      // train_seconds sums the training time of every part of the run.
      outcome.details["resumed_at_steps"] = resumed_at_steps;
    }
    BNN_ASSIGN_OR_RETURN(
        const ClassificationScores scores,
        ScoreClassification(snapshot, test, common.test_samples, predict_seed));
    outcome.metrics = {{"accuracy", scores.accuracy},
                       {"nll", scores.nll},
                       {"ece", scores.ece},
                       {"brier", scores.brier}};
    outcome.details["reliability"] = ReliabilityJson(scores.reliability);
    if (eval_every > 0) {
      curve["every"] = eval_every;
      outcome.details["learning_curve"] = std::move(curve);
    }
    outcome.details["train_seconds"] = snapshot.training.seconds;
    outcome.details["steps"] = snapshot.training.steps;
    outcome.details["epochs"] = snapshot.training.epochs;
    outcome.details["final_minibatch_nll"] = snapshot.training.final_loss;
    outcome.details["num_train"] = setup.train.num_rows();
    outcome.details["num_test"] = test.num_rows();
    return outcome;
  };
  BNN_ASSIGN_OR_RETURN(SplitOutcome outcome, RunSingle(common.threads, run));

  Json config;
  DescribeClassifierSetup(setup, &config);
  config[flags.Has("test-idx") ? "test_idx" : "test_csv"] = test_source;
  config["num_test"] = test.num_rows();
  config["ece_bins"] = kEceBins;
  config["eval_every"] = eval_every;
  if (!setup.save_snapshot.empty()) {
    config["snapshot"] = setup.save_snapshot;
  }
  config["conventions"] =
      "nll in nats; ece with 15 equal-width bins of the top-class "
      "confidence; brier = mean_i sum_c (p_ic - 1[y_i = c])^2; one split = "
      "one seeded training run";
  const std::string name = SetName(setup.train_source);
  return Report(info, common, "classify",
                absl::StrCat("classify · ", name, " · ", common.method),
                std::move(config), {std::move(outcome)}, SecondsSince(start));
}

}  // namespace bnn::experiment
