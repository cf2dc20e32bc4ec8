// bnn-experiment ood: out-of-distribution detection by predictive
// uncertainty (Kurle et al., Sec. 5.5). A classifier, trained here as in
// `classify` or loaded with --snapshot, predicts an in-distribution set and
// an OOD set of the same input shape with --test-samples posterior samples;
// each row is scored by
//   entropy             H[p(y|x)] of the MC-averaged probabilities, and
//   mutual information  H[p] - E_s H[p_s] (BALD), nats;
// AUROC treats OOD rows as the positives (higher score = more OOD). The
// paper plots the ROC of the negative entropy with the in-distribution rows
// as positives: the mirror image of ours, with the same area.
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

#include "bnn/predict/metrics.h"
#include "bnn/random.h"
#include "bnn/status.h"

#include "bench/accuracy/classification.h"
#include "bench/accuracy/experiment.h"
#include "bench/accuracy/modes.h"
#include "bench/accuracy/scoring.h"

namespace bnn::experiment {
namespace {

struct InputSet {
  Dataset data;
  bool labelled = false;
  std::string source;
};

// --{prefix}-idx IMAGES[:LABELS] or --{prefix}-csv FILE (label column
// optional).
absl::StatusOr<InputSet> ReadInputSet(const FlagSet& flags,
                                      const std::string& prefix,
                                      double idx_scale) {
  const std::string idx_flag = prefix + "-idx", csv_flag = prefix + "-csv";
  if (flags.Has(idx_flag) == flags.Has(csv_flag)) {
    return absl::InvalidArgumentError(
        absl::StrCat("give exactly one of --", idx_flag, " and --", csv_flag));
  }
  InputSet set;
  if (flags.Has(idx_flag)) {
    set.source = flags.Get(idx_flag);
    BNN_ASSIGN_OR_RETURN(const IdxFiles files,
                         ParseIdxFiles(idx_flag, set.source, false));
    BNN_ASSIGN_OR_RETURN(set.data, ReadIdxSet(files, idx_scale));
    set.labelled = !files.labels.empty();
  } else {
    set.source = flags.Get(csv_flag);
    BNN_ASSIGN_OR_RETURN(CsvSet csv,
                         ReadCsvSet(set.source, flags.Get("target"), true));
    set.data = std::move(csv.data);
    set.labelled = csv.labelled;
  }
  return set;
}

Json RocJson(const std::vector<RocPoint>& curve) {
  Json fpr = Json::array(), tpr = Json::array(), threshold = Json::array();
  for (const RocPoint& p : curve) {
    fpr.push_back(p.fpr);
    tpr.push_back(p.tpr);
    // +inf (the first point) is written as null.
    threshold.push_back(std::isfinite(p.threshold) ? Json(p.threshold)
                                                   : Json(nullptr));
  }
  return {{"fpr", std::move(fpr)},
          {"tpr", std::move(tpr)},
          {"threshold", std::move(threshold)}};
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? std::nan("") : sum / static_cast<double>(v.size());
}

// The model: --snapshot, or trained from the classify training flags.
struct Model {
  CommonOptions common;
  ClassifierSetup setup;  // empty with --snapshot
  std::string snapshot_path;
  Snapshot snapshot;
};

absl::StatusOr<Model> ParseModel(const FlagSet& flags) {
  Model model;
  if (!flags.Has("snapshot")) {
    BNN_ASSIGN_OR_RETURN(model.setup, ParseClassifierSetup(flags));
    model.common = model.setup.common;
    return model;
  }
  for (const char* flag : {"train-idx", "csv", "iterations", "param", "tune",
                           "save-snapshot", "hidden", "activation"}) {
    if (flags.Has(flag)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " describes training; --snapshot replaces it"));
    }
  }
  model.snapshot_path = flags.Get("snapshot");
  BNN_ASSIGN_OR_RETURN(model.snapshot, ReadSnapshotFile(model.snapshot_path));
  if (!IsClassification(model.snapshot.task)) {
    return absl::InvalidArgumentError(
        absl::StrCat(model.snapshot_path, " is not a classifier"));
  }
  // The common flags describe the snapshot's method.
  FlagSet with_method = flags;
  if (!flags.Has("method")) {
    BNN_RETURN_IF_ERROR(with_method.Parse({"--method", model.snapshot.method}));
  }
  BNN_ASSIGN_OR_RETURN(model.common, ParseCommonFlags(with_method));
  if (model.common.method != model.snapshot.method) {
    return absl::InvalidArgumentError(
        absl::StrCat("--method ", model.common.method, " but ",
                     model.snapshot_path, " holds ", model.snapshot.method));
  }
  model.common.hidden_sizes = model.snapshot.model.hidden_sizes;
  if (!model.snapshot.model.activations.empty()) {
    model.common.activation = model.snapshot.model.activations[0];
  }
  return model;
}

}  // namespace

void DeclareOodFlags(FlagSet* flags) {
  DeclareCommonFlags(128, flags);
  DeclareClassifierFlags(flags);
  flags
      ->Flag("snapshot",
             "a trained classifier (classify --save-snapshot) "
             "instead of training")
      .Flag("in-idx",
            "in-distribution set as IDX IMAGES[:LABELS] (labels add "
            "in-distribution accuracy)")
      .Flag("in-csv", "in-distribution set as CSV (label column optional)")
      .Flag("ood-idx", "OOD set as IDX IMAGES[:LABELS] (labels ignored)")
      .Flag("ood-csv",
            "OOD set as CSV with the same features (a label column is "
            "dropped)")
      .Flag("roc-points", "ROC curve points kept in the JSON", "200");
}

absl::Status RunOod(const FlagSet& flags, const RunInfo& info) {
  const auto start = std::chrono::steady_clock::now();
  BNN_ASSIGN_OR_RETURN(Model model, ParseModel(flags));
  const CommonOptions& common = model.common;
  BNN_ASSIGN_OR_RETURN(const double idx_scale, ParseIdxScale(flags));
  BNN_ASSIGN_OR_RETURN(InputSet in, ReadInputSet(flags, "in", idx_scale));
  BNN_ASSIGN_OR_RETURN(const InputSet ood,
                       ReadInputSet(flags, "ood", idx_scale));
  BNN_ASSIGN_OR_RETURN(const int64_t roc_points,
                       flags.GetInt("roc-points", 2, 1 << 20));

  const auto run = [&]() -> absl::StatusOr<SplitOutcome> {
    SplitOutcome outcome;
    if (model.snapshot_path.empty()) {
      BNN_ASSIGN_OR_RETURN(
          model.snapshot,
          TrainClassifier(model.setup,
                          StreamSeed(common.seed, 0, Stream::kTraining)));
      BNN_RETURN_IF_ERROR(
          MaybeSaveSnapshot(model.setup.save_snapshot, model.snapshot));
      outcome.details["train_seconds"] = model.snapshot.training.seconds;
    }
    const Snapshot& snapshot = model.snapshot;
    for (const InputSet* set : {static_cast<const InputSet*>(&in), &ood}) {
      if (set->data.num_features != snapshot.model.input_dim) {
        return absl::InvalidArgumentError(absl::StrCat(
            set->source, " has ", set->data.num_features,
            " features; the model takes ", snapshot.model.input_dim));
      }
    }
    const uint64_t seed = StreamSeed(common.seed, 0, Stream::kPrediction);
    BNN_ASSIGN_OR_RETURN(const Prediction p_in,
                         PredictRows(snapshot, in.data, common.test_samples,
                                     Rng(seed).Fork(1).seed()));
    BNN_ASSIGN_OR_RETURN(const Prediction p_ood,
                         PredictRows(snapshot, ood.data, common.test_samples,
                                     Rng(seed).Fork(2).seed()));

    const int64_t n_in = in.data.num_rows(), n_ood = ood.data.num_rows();
    std::unique_ptr<bool[]> positive(new bool[n_in + n_ood]);
    for (int64_t i = 0; i < n_in + n_ood; ++i) positive[i] = i >= n_in;
    const auto is_ood = absl::MakeConstSpan(positive.get(), n_in + n_ood);
    Json roc = Json::object();
    for (const auto& [name, in_scores, ood_scores] :
         {std::tuple{"entropy", &p_in.entropy, &p_ood.entropy},
          std::tuple{"mutual_information", &p_in.mutual_information,
                     &p_ood.mutual_information}}) {
      std::vector<double> scores = *in_scores;
      scores.insert(scores.end(), ood_scores->begin(), ood_scores->end());
      const double auroc = Auroc(scores, is_ood);
      if (std::string(name) == "entropy") {
        outcome.metrics.emplace_back("auroc", auroc);
        outcome.metrics.emplace_back("auroc_entropy", auroc);
      } else {
        outcome.metrics.emplace_back("auroc_mi", auroc);
      }
      roc[name] = RocJson(RocCurve(scores, is_ood, roc_points));
      outcome.details[absl::StrCat("mean_", name, "_in")] = Mean(*in_scores);
      outcome.details[absl::StrCat("mean_", name, "_ood")] = Mean(*ood_scores);
    }
    if (in.labelled) {
      BNN_RETURN_IF_ERROR(MatchClasses(snapshot.class_values, &in.data));
      const ClassificationScores s = ScoreProbabilities(p_in, in.data);
      outcome.metrics.emplace_back("in_accuracy", s.accuracy);
      outcome.metrics.emplace_back("in_nll", s.nll);
      outcome.metrics.emplace_back("in_ece", s.ece);
    }
    outcome.details["roc"] = std::move(roc);
    outcome.details["num_in"] = n_in;
    outcome.details["num_ood"] = n_ood;
    return outcome;
  };
  BNN_ASSIGN_OR_RETURN(SplitOutcome outcome, RunSingle(common.threads, run));

  Json config;
  if (model.snapshot_path.empty()) {
    DescribeClassifierSetup(model.setup, &config);
  } else {
    config["snapshot"] = model.snapshot_path;
    config["hidden_sizes"] = common.hidden_sizes;
    config["snapshot_params"] = Json::object();
    for (const auto& [k, v] : model.snapshot.params) {
      config["snapshot_params"][k] = v;
    }
    config["snapshot_steps"] = model.snapshot.training.steps;
  }
  config["idx_scale"] = idx_scale;
  config["in"] = in.source;
  config["ood"] = ood.source;
  config["roc_points_max"] = roc_points;
  config["conventions"] =
      "positives are OOD rows; scores: predictive entropy and mutual "
      "information (nats) of the MC predictive; auroc = auroc_entropy; ROC "
      "threshold null = +inf";
  const std::string name = SetName(ood.source);
  return Report(info, common, "ood",
                absl::StrCat("ood · ", name, " · ", common.method),
                std::move(config), {std::move(outcome)}, SecondsSince(start));
}

}  // namespace bnn::experiment
