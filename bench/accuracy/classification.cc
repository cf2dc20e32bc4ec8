#include "bench/accuracy/classification.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <omp.h>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include <Eigen/Core>

#include "bnn/data/readers.h"
#include "bnn/interrupt.h"
#include "bnn/methods/registry.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

namespace bnn::experiment {

absl::StatusOr<IdxFiles> ParseIdxFiles(const std::string& flag,
                                       const std::string& value,
                                       bool labels_required) {
  const std::vector<std::string> parts = absl::StrSplit(value, ':');
  IdxFiles files;
  if (parts.size() == 2 && !parts[0].empty() && !parts[1].empty()) {
    files.images = parts[0];
    files.labels = parts[1];
    return files;
  }
  if (parts.size() == 1 && !parts[0].empty() && !labels_required) {
    files.images = parts[0];
    return files;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, " = '", value, "' must be IMAGES:LABELS",
      labels_required ? "" : " or IMAGES", " (IDX files, gzip'd or not)"));
}

std::string SetName(const std::string& source) {
  const std::string first = source.substr(0, source.find(':'));
  const size_t slash = first.find_last_of('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

absl::StatusOr<Dataset> ReadIdxSet(const IdxFiles& files, double scale) {
  IdxOptions options;
  options.scale = scale;
  return ReadIdx(files.images, files.labels, options);
}

absl::StatusOr<double> ParseIdxScale(const FlagSet& flags) {
  if (!flags.Has("idx-scale")) return 1.0 / 255.0;
  double scale = 0;
  if (!absl::SimpleAtod(flags.Get("idx-scale"), &scale) ||
      !(scale > 0 && std::isfinite(scale))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--idx-scale = '", flags.Get("idx-scale"), "' must be > 0"));
  }
  return scale;
}

absl::StatusOr<CsvSet> ReadCsvSet(const std::string& path,
                                  const std::string& target,
                                  bool target_optional) {
  // Every column as a feature first; the label column is then taken out by
  // name (or, when it must exist, by index).
  BNN_ASSIGN_OR_RETURN(Dataset all, ReadCsv(path, CsvOptions{}));
  const int64_t columns = all.num_features;
  int64_t label = -1;
  for (int64_t j = 0; j < static_cast<int64_t>(all.feature_names.size()); ++j) {
    if (all.feature_names[j] == target) label = j;
  }
  int index = -1;
  if (label < 0 && !target_optional && absl::SimpleAtoi(target, &index) &&
      index >= 0 && index < columns) {
    label = index;
  }
  CsvSet out;
  if (label < 0) {
    if (!target_optional) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": label column '", target,
          "' is neither a header name nor an index in [0, ", columns, ")"));
    }
    out.data = std::move(all);
    return out;
  }
  Dataset& d = out.data;
  d.task = Task::kRegression;
  d.num_features = columns - 1;
  d.target_name = all.feature_names.empty() ? target : all.feature_names[label];
  for (int64_t j = 0; j < static_cast<int64_t>(all.feature_names.size()); ++j) {
    if (j != label) d.feature_names.push_back(all.feature_names[j]);
  }
  d.features.reserve(all.num_rows() * d.num_features);
  for (int64_t i = 0; i < all.num_rows(); ++i) {
    const double* row = all.row(i);
    for (int64_t j = 0; j < columns; ++j) {
      if (j != label) d.features.push_back(row[j]);
    }
    d.targets.push_back(row[label]);
  }
  out.labelled = true;
  return out;
}

absl::Status MatchClasses(const std::vector<double>& class_values,
                          Dataset* data) {
  if (class_values.size() < 2) {
    return absl::InvalidArgumentError("the model has fewer than two classes");
  }
  const bool indexed = IsClassification(data->task);
  for (int64_t i = 0; i < data->num_rows(); ++i) {
    double value = data->targets[i];
    if (indexed) {
      const auto k = static_cast<size_t>(std::llround(value));
      if (k >= data->class_values.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("row ", i, ": class index ", value, " out of range"));
      }
      value = data->class_values[k];
    }
    const auto it = std::find(class_values.begin(), class_values.end(), value);
    if (it == class_values.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", i, ": label ", value, " is not one of the model's ",
          class_values.size(), " classes"));
    }
    data->targets[i] = static_cast<double>(it - class_values.begin());
  }
  data->class_values = class_values;
  data->num_classes = static_cast<int>(class_values.size());
  data->task = class_values.size() == 2 ? Task::kBinary : Task::kMulticlass;
  return absl::OkStatus();
}

void DeclareClassifierFlags(FlagSet* flags) {
  flags
      ->Flag("train-idx",
             "training set as IDX IMAGES:LABELS (pixels / 255, not "
             "standardised)")
      .Flag("csv", "training set as CSV with a label column (instead of IDX)")
      .Flag("target", "label column of the CSV files (name or 0-based index)",
            "label")
      .Flag("idx-scale",
            "factor applied to IDX bytes (default 1/255: pixels in [0, 1]); "
            "use the training value for every set of a model")
      .Flag("iterations",
            "minibatch steps of the run (trainer steps=N); 0 = --param epochs",
            "0")
      .Flag("save-snapshot", "write the trained snapshot here (for ood)");
}

absl::StatusOr<ClassifierSetup> ParseClassifierSetup(const FlagSet& flags) {
  ClassifierSetup setup;
  BNN_ASSIGN_OR_RETURN(setup.iterations,
                       flags.GetInt("iterations", 0, int64_t{1} << 30));
  setup.save_snapshot = flags.Get("save-snapshot");
  BNN_ASSIGN_OR_RETURN(setup.idx_scale, ParseIdxScale(flags));
  const bool idx = flags.Has("train-idx");
  if (idx == flags.Has("csv")) {
    return absl::InvalidArgumentError(
        "give the training set as exactly one of --train-idx and --csv");
  }
  setup.from_idx = idx;
  setup.train_source = flags.Get(idx ? "train-idx" : "csv");

  BNN_ASSIGN_OR_RETURN(setup.common, ParseCommonFlags(flags));
  CommonOptions& common = setup.common;
  if (!common.grid.empty()) {
    return absl::InvalidArgumentError(
        "this mode trains one model: --tune is not supported");
  }
  if (common.max_splits > 1) {
    return absl::InvalidArgumentError(
        "this mode has one split (the given train/test sets)");
  }
  if (!common.hidden_given) {
    common.hidden_sizes.assign(kDefaultClassifierDepth,
                               kDefaultClassifierWidth);
  }
  if (!flags.Has("activation")) common.activation = Activation::kLeakyTanh;
  // Pixels / 255 already lie in [0, 1], the paper's input scaling.
  if (idx) common.params.emplace("standardize", "false");
  if (setup.iterations > 0) {
    const std::string steps = absl::StrCat(setup.iterations);
    auto [it, inserted] = common.params.emplace("steps", steps);
    if (!inserted && it->second != steps) {
      return absl::InvalidArgumentError(
          "--iterations and --param steps disagree");
    }
  }
  // The new keys must be valid too (ParseCommonFlags checked the others).
  BNN_RETURN_IF_ERROR(CheckTrainParams(common.method, common.params,
                                       MethodRegistry::Builtin()));

  if (idx) {
    BNN_ASSIGN_OR_RETURN(const IdxFiles files,
                         ParseIdxFiles("train-idx", setup.train_source, true));
    BNN_ASSIGN_OR_RETURN(setup.train, ReadIdxSet(files, setup.idx_scale));
  } else {
    BNN_ASSIGN_OR_RETURN(
        CsvSet csv, ReadCsvSet(setup.train_source, flags.Get("target"), false));
    setup.train = std::move(csv.data);
    BNN_RETURN_IF_ERROR(EncodeClassLabels(&setup.train));
  }
  return setup;
}

void DescribeClassifierSetup(const ClassifierSetup& setup, Json* config) {
  Json& c = *config;
  c[setup.from_idx ? "train_idx" : "csv"] = setup.train_source;
  c["num_train"] = setup.train.num_rows();
  c["features"] = setup.train.num_features;
  c["num_classes"] = setup.train.num_classes;
  c["class_values"] = setup.train.class_values;
  c["hidden_sizes"] = setup.common.hidden_sizes;
  c["iterations"] = setup.iterations;
  if (setup.from_idx) c["idx_scale"] = setup.idx_scale;
  c["input_scaling"] = setup.from_idx
                           ? "IDX bytes x idx_scale (1/255: [0, 1]), not "
                             "standardised"
                           : "CSV features, standardised on the training set "
                             "unless standardize=false";
}

absl::StatusOr<Snapshot> TrainClassifier(
    const ClassifierSetup& setup, uint64_t seed, int64_t eval_every,
    std::function<absl::Status(const Snapshot&)> observe,
    const ClassifierCheckpoints& checkpoints) {
  TrainRequest request;
  request.method = setup.common.method;
  request.params = setup.common.params;
  request.params["seed"] = absl::StrCat(seed);
  request.hidden_sizes = setup.common.hidden_sizes;
  request.activations = {setup.common.activation};
  const MethodRegistry& registry = MethodRegistry::Builtin();
  BNN_ASSIGN_OR_RETURN(
      const TrainingPlan plan,
      ResolveTrainingPlan(request, ShapeOf(setup.train), nullptr, registry));
  TrainCallbacks callbacks;
  callbacks.snapshot_every = eval_every;
  callbacks.on_snapshot = std::move(observe);
  if (!checkpoints.path.empty()) {
    callbacks.checkpoint_interval = checkpoints.interval;
    callbacks.checkpoint_every_steps = checkpoints.every_steps;
    callbacks.on_checkpoint = [&](const Checkpoint& checkpoint) {
      const int64_t step = checkpoint.trainer.step;
      if (checkpoints.before_write) {
        BNN_RETURN_IF_ERROR(checkpoints.before_write(step));
      }
      BNN_RETURN_IF_ERROR(WriteCheckpointFile(checkpoints.path, checkpoint));
      std::cerr << "[step " << step << "] checkpoint " << checkpoints.path
                << std::endl;
      if (checkpoints.stop_at_step > 0 && step >= checkpoints.stop_at_step) {
        return absl::AbortedError(absl::StrCat(
            "stopped after the checkpoint at step ", step, " (--stop-at-step ",
            checkpoints.stop_at_step, "); rerun to continue"));
      }
      return absl::OkStatus();
    };
  }
  return Train(plan, setup.train, nullptr, registry, callbacks, Interrupt(),
               checkpoints.resume);
}

absl::Status MaybeSaveSnapshot(const std::string& path,
                               const Snapshot& snapshot) {
  if (path.empty()) return absl::OkStatus();
  return WriteSnapshotFile(path, snapshot);
}

absl::StatusOr<SplitOutcome> RunSingle(
    int threads, const std::function<absl::StatusOr<SplitOutcome>()>& fn) {
  Eigen::setNbThreads(threads);
  omp_set_num_threads(threads);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SplitOutcome> outcome = fn();
  if (outcome.ok()) {
    outcome->split = 0;
    outcome->seconds = SecondsSince(start);
  }
  return outcome;
}

}  // namespace bnn::experiment
