#include "client/bnnctl_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>

#include "bnn/methods/options.h"
#include "bnn/predict/acquisition.h"
#include "bnn/status.h"

#include "server/auth/scope.h"
#include "server/auth/token_file.h"

namespace bnn::client {
namespace {

// Value parsers. Their messages do not name the flag: CLI11 reports a
// failed check as "--flag: message".

absl::StatusOr<std::string> ParseNonEmpty(absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError("must not be empty");
  return std::string(value);
}

absl::StatusOr<int> ParsePositiveInt(absl::string_view value) {
  int out = 0;
  if (!absl::SimpleAtoi(value, &out) || out < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", value, "' is not an integer >= 1"));
  }
  return out;
}

// Dataset versions count from 1.
absl::StatusOr<int64_t> ParseVersion(absl::string_view value) {
  int64_t out = 0;
  if (!absl::SimpleAtoi(value, &out) || out < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", value, "' is not a version (an integer >= 1)"));
  }
  return out;
}

absl::StatusOr<uint64_t> ParseSeed(absl::string_view value) {
  uint64_t out = 0;
  // SimpleAtoi would accept "-1" for an unsigned type by wrapping around on
  // some versions; reject signs explicitly.
  if (absl::StartsWith(value, "-") || absl::StartsWith(value, "+") ||
      !absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", value, "' is not an integer in [0, 18446744073709551615]"));
  }
  return out;
}

absl::StatusOr<double> ParsePositiveSeconds(absl::string_view value) {
  double out = 0;
  if (!absl::SimpleAtod(value, &out) || !std::isfinite(out) || out <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", value, "' is not a positive number of seconds"));
  }
  return out;
}

absl::StatusOr<double> ParseNonNegative(absl::string_view value) {
  double out = 0;
  if (!absl::SimpleAtod(value, &out) || !std::isfinite(out) || out < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", value, "' is not a number >= 0"));
  }
  return out;
}

absl::StatusOr<bool> ParseClassificationTask(absl::string_view value) {
  if (value != "regression" && value != "classification") {
    return absl::InvalidArgumentError(absl::StrCat(
        "must be regression or classification, got '", value, "'"));
  }
  return value == "classification";
}

absl::StatusOr<std::string> ParseHeuristic(absl::string_view value) {
  absl::StatusOr<AcquisitionHeuristic> heuristic = StringToHeuristic(value);
  if (!heuristic.ok()) return heuristic.status();
  return std::string(value);
}

absl::StatusOr<std::vector<int>> ParseHiddenSizes(absl::string_view value) {
  std::vector<int> sizes;
  if (value == "none") return sizes;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", part,
          "' is not a positive layer width (use e.g. 50,50, or none for no "
          "hidden layer)"));
    }
    sizes.push_back(width);
  }
  return sizes;
}

// Job states for `jobs --state`: the wire names without JOB_STATE_, lower
// case, comma-separated.
absl::StatusOr<std::vector<std::string>> ParseJobStates(
    absl::string_view value) {
  constexpr absl::string_view kStates[] = {
      "queued",    "running",     "succeeded", "failed",
      "cancelled", "interrupted", "cancelling"};
  std::vector<std::string> states;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    if (std::find(std::begin(kStates), std::end(kStates), part) ==
        std::end(kStates)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' is not a job state (",
                       absl::StrJoin(kStates, ", "), ")"));
    }
    states.emplace_back(part);
  }
  return states;
}

absl::StatusOr<std::vector<std::string>> ParseActivations(
    absl::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty name in '", value, "'"));
    }
    out.emplace_back(part);
  }
  return out;
}

absl::StatusOr<std::vector<double>> ParseQuantiles(absl::string_view value) {
  std::vector<double> levels;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    double level = 0;
    if (!absl::SimpleAtod(part, &level) || !(level > 0 && level < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", part, "' is not a level in (0, 1) (use e.g. 0.05,0.5,0.95)"));
    }
    levels.push_back(level);
  }
  return levels;
}

// Token scopes and names, checked by the token file's own rules and kept as
// given.
absl::StatusOr<std::string> ParseScopes(absl::string_view value) {
  absl::StatusOr<server::ScopeSet> scopes = server::ScopeSet::Parse(value);
  if (!scopes.ok()) return scopes.status();
  return std::string(value);
}

absl::StatusOr<std::string> ParseTokenName(absl::string_view value) {
  if (absl::Status status = server::ValidateTokenName(value); !status.ok()) {
    return status;
  }
  return std::string(value);
}

absl::StatusOr<std::pair<std::string, std::string>> ParseParam(
    absl::string_view assignment) {
  ParamMap one;
  if (absl::Status status = ParseParamAssignment(assignment, &one);
      !status.ok()) {
    return status;
  }
  return *one.begin();
}

// Adds an option NAME taking one value that `parse` checks and converts into
// *out (a T or a std::optional<T>); *out is left alone when the option is
// not given. `parse` runs as a CLI11 check first, so a bad value is a usage
// error naming the flag.
template <typename T, typename Out>
CLI::Option* AddParsed(CLI::App* app, const std::string& name,
                       absl::StatusOr<T> (*parse)(absl::string_view), Out* out,
                       const std::string& type_name, const std::string& help) {
  CLI::Option* option = app->add_option_function<std::string>(
      name, [parse, out](const std::string& value) { *out = *parse(value); },
      help);
  option->check(CLI::Validator(
      [parse](std::string& value) {
        absl::StatusOr<T> parsed = parse(value);
        return parsed.ok() ? std::string()
                           : std::string(parsed.status().message());
      },
      /*validator_desc=*/""));
  option->type_name(type_name);
  return option;
}

// A required flag (or positional argument) that takes any non-empty value.
void AddRequired(CLI::App* app, const std::string& name, std::string* out,
                 const std::string& type_name, const std::string& help) {
  AddParsed(app, name, ParseNonEmpty, out, type_name, help)->required();
}

// A flag that takes no value (CLI11 would otherwise accept --flag=false).
CLI::Option* AddFlag(CLI::App* app, const std::string& name, bool* out,
                     const std::string& help) {
  return app->add_flag(name, *out, help)->disable_flag_override();
}

// The options of every command, bound to the command structs they fill.
struct Commands {
  CLI::App* upload;
  CLI::App* append;
  CLI::App* datasets;
  CLI::App* dataset;
  CLI::App* train;
  CLI::App* job;
  CLI::App* cancel;
  CLI::App* jobs;
  CLI::App* watch;
  CLI::App* predict;
  CLI::App* acquire;
  CLI::App* evaluate;
  CLI::App* snapshots;
  CLI::App* snapshot;
  CLI::App* delete_snapshot;
  CLI::App* export_snapshot;
  CLI::App* import_snapshot;
  CLI::App* methods;
  CLI::App* health;
  CLI::App* plot;
  CLI::App* plot_loss;
  CLI::App* plot_bands;
  CLI::App* plot_reliability;
  CLI::App* token;
  CLI::App* token_create;
  CLI::App* models;
  CLI::App* publish;
  CLI::App* alias;
  CLI::App* delete_model;
  CLI::App* delete_dataset;
  CLI::App* help;

  UploadCommand upload_args;
  AppendCommand append_args;
  DatasetCommand dataset_args;
  TrainCommand train_args;
  std::vector<std::string> train_params;
  JobCommand job_args;
  CancelCommand cancel_args;
  JobsCommand jobs_args;
  WatchCommand watch_args;
  PredictCommand predict_args;
  AcquireCommand acquire_args;
  EvaluateCommand evaluate_args;
  SnapshotsCommand snapshots_args;
  SnapshotCommand snapshot_args;
  DeleteSnapshotCommand delete_snapshot_args;
  ExportCommand export_args;
  ImportCommand import_args;
  TokenCreateCommand token_create_args;
  PlotCommand plot_args;
  ModelsCommand models_args;
  PublishCommand publish_args;
  AliasCommand alias_args;
  DeleteModelCommand delete_model_args;
  DeleteDatasetCommand delete_dataset_args;
  std::string help_topic;
};

constexpr char kModelRefHelp[] =
    "Model reference instead of --snapshot: NAME (its latest version), "
    "NAME@ALIAS or NAME:VERSION";

constexpr char kCsvHelp[] =
    "CSV file with a header line ('-': standard input); fields may be quoted "
    "(RFC 4180)";

void AddGlobalFlags(CLI::App* app, GlobalFlags* global) {
  AddParsed(app, "--server", ParseNonEmpty, &global->server, "HOST:PORT",
            "Server address (default 127.0.0.1:50051)")
      ->envname("BNN_SERVER");
  AddFlag(app, "--json", &global->json,
          "Machine-readable JSON on stdout (docs/api.md)");
  AddParsed(app, "--timeout", ParsePositiveSeconds, &global->timeout_seconds,
            "SECONDS", "Deadline of each RPC (default 30)");
  AddParsed(app, "--token", ParseNonEmpty, &global->token, "TOKEN",
            "Sent as 'authorization: Bearer TOKEN' on every call")
      ->envname("BNN_TOKEN");
  // CLI11's ExistingFile without its ":FILE" in the help text.
  CLI::Validator existing_file = CLI::ExistingFile;
  existing_file.description("");
  AddParsed(app, "--tls-ca", ParseNonEmpty, &global->tls_ca_file, "FILE",
            "TLS, trusting the authorities in this PEM file")
      ->check(existing_file);
  CLI::Option* cert =
      AddParsed(app, "--tls-cert", ParseNonEmpty, &global->tls_cert_file,
                "FILE", "TLS, with this PEM client certificate chain")
          ->check(existing_file);
  CLI::Option* key =
      AddParsed(app, "--tls-key", ParseNonEmpty, &global->tls_key_file, "FILE",
                "The private key (PEM) of --tls-cert")
          ->check(existing_file);
  cert->needs(key);
  key->needs(cert);
}

void AddCommands(CLI::App* app, Commands* c) {
  c->upload = app->add_subcommand(
      "upload",
      "Upload a labelled CSV file as a new dataset (COL: a header name or a "
      "0-based index)");
  AddRequired(c->upload, "--name", &c->upload_args.name, "NAME",
              "Dataset name");
  AddParsed(c->upload, "--task", ParseClassificationTask,
            &c->upload_args.classification, "regression|classification", "Task")
      ->required();
  AddRequired(c->upload, "--csv", &c->upload_args.csv_path, "FILE", kCsvHelp);
  AddRequired(c->upload, "--target", &c->upload_args.target, "COL",
              "Target column");

  c->append = app->add_subcommand(
      "append",
      "Append labelled rows, creating the dataset's next version; with "
      "--expected-version, fail unless V is still the latest");
  AddRequired(c->append, "--dataset", &c->append_args.dataset_id, "ID",
              "Dataset");
  AddRequired(c->append, "--csv", &c->append_args.csv_path, "FILE", kCsvHelp);
  AddRequired(c->append, "--target", &c->append_args.target, "COL",
              "Target column");
  AddParsed(c->append, "--expected-version", ParseVersion,
            &c->append_args.expected_version, "V",
            "Fail unless V is the latest version");

  c->datasets = app->add_subcommand("datasets", "List the stored datasets");

  c->dataset = app->add_subcommand(
      "dataset", "Show one dataset (its latest version unless --version)");
  AddRequired(c->dataset, "DATASET_ID", &c->dataset_args.dataset_id, "ID",
              "Dataset");
  AddParsed(c->dataset, "--version", ParseVersion, &c->dataset_args.version,
            "V", "Dataset version");

  c->train = app->add_subcommand(
      "train",
      "Start a training job; prints its id. --parent warm-starts from a "
      "snapshot (whose architecture is used: --hidden may be left out; and "
      "whose method parameters are kept unless --param overrides them)");
  TrainCommand& train = c->train_args;
  AddRequired(c->train, "--dataset", &train.dataset_id, "ID", "Dataset");
  AddRequired(c->train, "--method", &train.method, "NAME",
              "Inference method (bnnctl methods)");
  AddParsed(c->train, "--hidden", ParseHiddenSizes, &train.hidden_sizes,
            "50[,50...]|none",
            "Hidden layer widths (required without --parent)");
  AddParsed(c->train, "--activation", ParseActivations, &train.activations,
            "relu[,tanh...]", "Activation of each hidden layer");
  AddParsed(c->train, "--epochs", ParsePositiveInt, &train.epochs, "E",
            "Epochs")
      ->required();
  AddParsed(c->train, "--seed", ParseSeed, &train.seed, "S", "Random seed");
  c->train
      ->add_option("--param", c->train_params,
                   "Method parameter (repeatable; bnnctl methods lists them)")
      ->allow_extra_args(false)
      ->type_name("KEY=VALUE")
      ->check(CLI::Validator(
          [](std::string& value) {
            absl::StatusOr<std::pair<std::string, std::string>> param =
                ParseParam(value);
            return param.ok() ? std::string()
                              : std::string(param.status().message());
          },
          ""));
  AddParsed(c->train, "--dataset-version", ParseVersion, &train.dataset_version,
            "V", "Train on this version (default: the latest)");
  AddParsed(c->train, "--parent", ParseNonEmpty, &train.parent_snapshot_id,
            "SNAPSHOT", "Warm-start from this snapshot");
  AddFlag(c->train, "--prior-from-parent", &train.prior_from_parent,
          "Make the parent's posterior the prior (continual learning)");
  AddParsed(c->train, "--model", ParseNonEmpty, &train.model_name, "NAME",
            "File the job under this model name");
  AddFlag(c->train, "--publish", &train.publish,
          "Publish the snapshot under --model when the job succeeds");
  AddFlag(c->train, "--wait", &train.wait,
          "Watch the job until it ends; exit 1 unless it succeeded");
  AddParsed(c->train, "--wait-timeout", ParsePositiveSeconds,
            &train.wait_timeout_seconds, "SECONDS",
            "Limit of --wait (default 3600)");

  c->job =
      app->add_subcommand("job", "Show a job; --wait polls until it finishes");
  AddRequired(c->job, "JOB_ID", &c->job_args.job_id, "ID", "Job");
  AddFlag(c->job, "--wait", &c->job_args.wait,
          "Poll until the job finishes; exit 1 unless it succeeded");
  AddParsed(c->job, "--wait-timeout", ParsePositiveSeconds,
            &c->job_args.wait_timeout_seconds, "SECONDS",
            "Limit of --wait (default 3600)");

  c->cancel = app->add_subcommand("cancel", "Cancel a queued or running job");
  AddRequired(c->cancel, "JOB_ID", &c->cancel_args.job_id, "ID", "Job");

  c->jobs = app->add_subcommand("jobs", "List jobs, newest first");
  JobsCommand& jobs = c->jobs_args;
  AddParsed(c->jobs, "--state", ParseJobStates, &jobs.states,
            "STATE[,STATE...]",
            "Only jobs in these states (queued, running, succeeded, failed, "
            "cancelled, interrupted, cancelling)");
  AddParsed(c->jobs, "--dataset", ParseNonEmpty, &jobs.dataset_id, "ID",
            "Only jobs training on this dataset");
  AddParsed(c->jobs, "--method", ParseNonEmpty, &jobs.method, "NAME",
            "Only jobs of this method");
  AddParsed(c->jobs, "--model", ParseNonEmpty, &jobs.model_name, "NAME",
            "Only jobs filed under this model name");
  AddParsed(c->jobs, "--limit", ParsePositiveInt, &jobs.limit, "N",
            "At most N jobs (default 20)");

  c->watch = app->add_subcommand(
      "watch",
      "Follow a job until it ends: a progress bar on a terminal, a line per "
      "event otherwise; reconnects while the server restarts");
  AddRequired(c->watch, "JOB_ID", &c->watch_args.job_id, "ID", "Job");
  AddParsed(c->watch, "--wait-timeout", ParsePositiveSeconds,
            &c->watch_args.wait_timeout_seconds, "SECONDS",
            "Give up after this long (default 3600)");

  c->predict = app->add_subcommand(
      "predict",
      "Predictive mean and std (regression) or class probabilities, entropy "
      "and mutual information for every row of a CSV file");
  PredictCommand& predict = c->predict_args;
  AddParsed(c->predict, "--snapshot", ParseNonEmpty, &predict.snapshot_id, "ID",
            "Snapshot");
  AddParsed(c->predict, "--model", ParseNonEmpty, &predict.model, "REF",
            kModelRefHelp);
  AddRequired(c->predict, "--csv", &predict.csv_path, "FILE", kCsvHelp);
  AddParsed(c->predict, "--samples", ParsePositiveInt, &predict.num_samples,
            "S", "Monte Carlo samples (required without --linearized)");
  AddParsed(c->predict, "--seed", ParseSeed, &predict.seed, "S", "Random seed");
  AddParsed(c->predict, "--target", ParseNonEmpty, &predict.target, "COL",
            "A column to leave out (every other one is a feature)");
  AddFlag(c->predict, "--linearized", &predict.linearized,
          "The closed-form GLM predictive (regression)");
  AddParsed(c->predict, "--quantiles", ParseQuantiles, &predict.quantiles,
            "0.05,0.5,0.95", "Predictive quantiles (regression)");
  AddFlag(c->predict, "--per-sample", &predict.per_sample,
          "Every sample's output too");

  c->acquire = app->add_subcommand(
      "acquire",
      "The K pool rows to label next, best first; P > 0 draws them at random "
      "with probability proportional to score^P (diverse batches)");
  AcquireCommand& acquire = c->acquire_args;
  AddParsed(c->acquire, "--snapshot", ParseNonEmpty, &acquire.snapshot_id, "ID",
            "Snapshot");
  AddParsed(c->acquire, "--model", ParseNonEmpty, &acquire.model, "REF",
            kModelRefHelp);
  AddParsed(c->acquire, "--dataset", ParseNonEmpty, &acquire.dataset_id, "ID",
            "Pool: a stored dataset");
  AddParsed(c->acquire, "--version", ParseVersion, &acquire.dataset_version,
            "V", "Version of the --dataset pool");
  AddParsed(c->acquire, "--csv", ParseNonEmpty, &acquire.csv_path, "FILE",
            "Pool: a CSV file of features ('-': standard input)");
  AddParsed(c->acquire, "--k", ParsePositiveInt, &acquire.k, "K",
            "Rows to acquire")
      ->required();
  AddParsed(c->acquire, "--heuristic", ParseHeuristic, &acquire.heuristic,
            "max_variance|entropy|bald|margin|batchbald|random",
            "Acquisition heuristic")
      ->required();
  AddParsed(c->acquire, "--samples", ParsePositiveInt, &acquire.num_samples,
            "S", "Monte Carlo samples (default: the server's)");
  AddParsed(c->acquire, "--seed", ParseSeed, &acquire.seed, "S", "Random seed");
  AddParsed(c->acquire, "--diversity-power", ParseNonNegative,
            &acquire.diversity_power, "P", "0: deterministic top-k (default)");

  c->evaluate = app->add_subcommand(
      "evaluate",
      "Scores of a model on labelled rows: RMSE and test log-likelihood "
      "(regression); accuracy, NLL, Brier, ECE and its reliability bins, and "
      "with out-of-distribution rows the AUROC of entropy and mutual "
      "information (classification)");
  EvaluateCommand& evaluate = c->evaluate_args;
  AddParsed(c->evaluate, "--snapshot", ParseNonEmpty, &evaluate.snapshot_id,
            "ID", "Snapshot");
  AddParsed(c->evaluate, "--model", ParseNonEmpty, &evaluate.model, "REF",
            kModelRefHelp);
  AddParsed(c->evaluate, "--dataset", ParseNonEmpty, &evaluate.dataset_id, "ID",
            "Labelled rows: a stored dataset");
  AddParsed(c->evaluate, "--version", ParseVersion, &evaluate.dataset_version,
            "V", "Version of the --dataset rows");
  AddParsed(c->evaluate, "--csv", ParseNonEmpty, &evaluate.csv_path, "FILE",
            "Labelled rows: a CSV file with a header line, its --target "
            "column the labels ('-': standard input)");
  AddParsed(c->evaluate, "--target", ParseNonEmpty, &evaluate.target, "COL",
            "The label column of --csv (header name or 0-based index)");
  AddParsed(c->evaluate, "--ood-dataset", ParseNonEmpty,
            &evaluate.ood_dataset_id, "ID",
            "Out-of-distribution rows (classifiers): a stored dataset");
  AddParsed(c->evaluate, "--ood-csv", ParseNonEmpty, &evaluate.ood_csv_path,
            "FILE",
            "Out-of-distribution rows (classifiers): a CSV file of features");
  AddParsed(c->evaluate, "--samples", ParsePositiveInt, &evaluate.num_samples,
            "S", "Monte Carlo samples (default: the server's)");
  AddParsed(c->evaluate, "--seed", ParseSeed, &evaluate.seed, "S",
            "Random seed");
  AddParsed(c->evaluate, "--ece-bins", ParsePositiveInt, &evaluate.ece_bins,
            "B", "Confidence bins of the ECE (default 15)");

  c->snapshots = app->add_subcommand(
      "snapshots", "List the stored snapshots (those trained on one dataset)");
  AddParsed(c->snapshots, "--dataset", ParseNonEmpty,
            &c->snapshots_args.dataset_id, "ID", "Only this dataset's");

  c->snapshot = app->add_subcommand("snapshot", "Show one snapshot");
  AddRequired(c->snapshot, "SNAPSHOT_ID", &c->snapshot_args.snapshot_id, "ID",
              "Snapshot");

  c->delete_snapshot = app->add_subcommand(
      "delete-snapshot",
      "Delete a snapshot; refused while model versions point at it, unless "
      "--force (which removes those versions)");
  AddRequired(c->delete_snapshot, "SNAPSHOT_ID",
              &c->delete_snapshot_args.snapshot_id, "ID", "Snapshot");
  AddFlag(c->delete_snapshot, "--force", &c->delete_snapshot_args.force,
          "Also if model versions point at it");

  c->export_snapshot = app->add_subcommand(
      "export", "Download a snapshot file (written only once complete)");
  AddParsed(c->export_snapshot, "--snapshot", ParseNonEmpty,
            &c->export_args.snapshot_id, "ID", "Snapshot");
  AddParsed(c->export_snapshot, "--model", ParseNonEmpty, &c->export_args.model,
            "REF", kModelRefHelp);
  AddRequired(c->export_snapshot, "--out", &c->export_args.out_path, "FILE",
              "Where to write it");

  c->import_snapshot = app->add_subcommand(
      "import",
      "Upload a snapshot file; prints the stored snapshot and its new id");
  AddRequired(c->import_snapshot, "--in", &c->import_args.in_path, "FILE",
              "Snapshot file");

  c->models = app->add_subcommand(
      "models", "List the named models, or show one with its versions");
  c->models->add_option("NAME", c->models_args.name, "A model");

  c->publish = app->add_subcommand(
      "publish",
      "Publish a snapshot as the next version of a model (latest moves to "
      "it; --alias moves other aliases too)");
  AddRequired(c->publish, "SNAPSHOT_ID", &c->publish_args.snapshot_id, "ID",
              "Snapshot");
  AddRequired(c->publish, "--model", &c->publish_args.model, "NAME",
              "Model name (created by its first publish)");
  c->publish
      ->add_option("--alias", c->publish_args.aliases,
                   "Alias to point at the new version (repeatable)")
      ->allow_extra_args(false)
      ->type_name("ALIAS");

  c->alias = app->add_subcommand(
      "alias",
      "Point a model's alias at a version (atomically), or --delete it");
  AddRequired(c->alias, "MODEL", &c->alias_args.model, "NAME", "Model");
  AddRequired(c->alias, "ALIAS", &c->alias_args.alias, "ALIAS",
              "Alias (not latest, which moves by itself)");
  AddParsed(c->alias, "VERSION", ParseVersion, &c->alias_args.version, "V",
            "Version (required without --delete)");
  AddFlag(c->alias, "--delete", &c->alias_args.remove, "Delete the alias");

  c->delete_model = app->add_subcommand(
      "delete-model", "Delete a model and its aliases (its snapshots stay)");
  AddRequired(c->delete_model, "MODEL", &c->delete_model_args.model, "NAME",
              "Model");

  c->delete_dataset = app->add_subcommand(
      "delete-dataset",
      "Delete a dataset; refused while snapshots or queued or running jobs "
      "use it, unless --force");
  AddRequired(c->delete_dataset, "DATASET", &c->delete_dataset_args.dataset_id,
              "ID|NAME", "Dataset id or name");
  AddFlag(c->delete_dataset, "--force", &c->delete_dataset_args.force,
          "Also while snapshots or jobs use it");

  c->methods = app->add_subcommand(
      "methods", "List the inference methods and their parameters");

  c->health = app->add_subcommand(
      "health", "The server's health, SERVING or not (needs no token)");

  c->plot = app->add_subcommand(
      "plot",
      "PNG figures drawn by the Python package bnn_serve (python3 -m "
      "bnn_serve.plot): a job's loss curve, a 1-D regression's predictive "
      "bands, a classifier's reliability diagram");
  c->plot->require_subcommand(1);
  PlotCommand& plot = c->plot_args;
  if (const char* python = std::getenv("BNN_PYTHON");
      python != nullptr && *python != '\0') {
    plot.python = python;
  }
  c->plot_loss = c->plot->add_subcommand("loss", "A job's loss curve");
  AddRequired(c->plot_loss, "JOB_ID", &plot.target, "ID", "Job");
  c->plot_bands = c->plot->add_subcommand(
      "bands",
      "1-D regression: the predictive mean with +-1 and +-2 std bands over "
      "the CSV's x range (widened by a quarter each side)");
  c->plot_reliability = c->plot->add_subcommand(
      "reliability",
      "A classifier's reliability diagram: the bins of Evaluate on labelled "
      "rows");
  for (CLI::App* kind : {c->plot_bands, c->plot_reliability}) {
    AddRequired(kind, "MODEL", &plot.target, "SNAPSHOT|REF",
                "Snapshot id or model reference");
    AddRequired(kind, "--csv", &plot.csv_path, "FILE",
                kind == c->plot_bands
                    ? "Rows of one feature column (and --target's)"
                    : "Labelled rows");
    AddParsed(kind, "--samples", ParsePositiveInt, &plot.num_samples, "S",
              "Monte Carlo samples (default: the server's)");
    AddParsed(kind, "--seed", ParseSeed, &plot.seed, "N", "Random seed");
  }
  AddParsed(c->plot_bands, "--target", ParseNonEmpty, &plot.target_column,
            "COL", "Target column: its rows are drawn as training points");
  AddRequired(c->plot_reliability, "--target", &plot.target_column, "COL",
              "Label column");
  AddParsed(c->plot_reliability, "--bins", ParsePositiveInt, &plot.bins, "B",
            "Confidence bins (default 15)");
  for (CLI::App* kind : {c->plot_loss, c->plot_bands, c->plot_reliability}) {
    AddParsed(kind, "--out", ParseNonEmpty, &plot.out_path, "FILE",
              "PNG file to write (default KIND.png)");
    AddParsed(kind, "--python", ParseNonEmpty, &plot.python, "PATH",
              "Python interpreter with bnn_serve and matplotlib (default: "
              "BNN_PYTHON, else /usr/bin/python3)");
  }

  c->token = app->add_subcommand("token",
                                 "Bearer tokens for the server's --token-file");
  c->token->require_subcommand(1);
  c->token_create = c->token->add_subcommand(
      "create",
      "Make a new random token, locally: prints it once, and the line to add "
      "to the server's --token-file");
  AddParsed(c->token_create, "--scopes", ParseScopes,
            &c->token_create_args.scopes, "SCOPES",
            "Comma-separated: predict, train, admin (docs/api.md)")
      ->required();
  AddParsed(c->token_create, "--name", ParseTokenName,
            &c->token_create_args.name, "NAME",
            "Names the token in server logs (default: token- and 8 hex "
            "digits of its hash)");

  c->help = app->add_subcommand("help", "Show the help of bnnctl or COMMAND");
  c->help->add_option("COMMAND", c->help_topic, "A command");
}

// `command` names exactly one of a snapshot and a model reference.
absl::Status CheckOneTarget(absl::string_view command,
                            const std::string& snapshot_id,
                            const std::string& model) {
  if (snapshot_id.empty() == model.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", command, "' needs exactly one of --snapshot ID and --model REF"));
  }
  return absl::OkStatus();
}

// Checks that only `parse` cannot express (flags that need or exclude each
// other) and turns the parsed subcommand into its Command.
absl::StatusOr<Command> BuildCommand(const CLI::App& app, Commands& c) {
  if (c.upload->parsed()) return c.upload_args;
  if (c.append->parsed()) return c.append_args;
  if (c.datasets->parsed()) return DatasetsCommand{};
  if (c.dataset->parsed()) return c.dataset_args;
  if (c.train->parsed()) {
    TrainCommand& train = c.train_args;
    if (train.prior_from_parent && train.parent_snapshot_id.empty()) {
      return absl::InvalidArgumentError(
          "flag --prior-from-parent needs --parent as well");
    }
    // A warm start inherits its parent's architecture, so --hidden is only
    // required without a parent.
    if (train.parent_snapshot_id.empty() && c.train->count("--hidden") == 0) {
      return absl::InvalidArgumentError(
          "'train' needs the flag --hidden (or --parent)");
    }
    if (train.publish && train.model_name.empty()) {
      return absl::InvalidArgumentError("flag --publish needs --model as well");
    }
    if (c.train->count("--wait-timeout") > 0 && !train.wait) {
      return absl::InvalidArgumentError(
          "flag --wait-timeout needs --wait as well");
    }
    for (const std::string& assignment : c.train_params) {
      auto [entry, inserted] = train.params.insert(*ParseParam(assignment));
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --param: '", entry->first, "' given more than once"));
      }
    }
    return train;
  }
  if (c.job->parsed()) {
    if (c.job->count("--wait-timeout") > 0 && !c.job_args.wait) {
      return absl::InvalidArgumentError(
          "flag --wait-timeout needs --wait as well");
    }
    return c.job_args;
  }
  if (c.cancel->parsed()) return c.cancel_args;
  if (c.jobs->parsed()) return c.jobs_args;
  if (c.watch->parsed()) return c.watch_args;
  if (c.predict->parsed()) {
    const PredictCommand& predict = c.predict_args;
    BNN_RETURN_IF_ERROR(
        CheckOneTarget("predict", predict.snapshot_id, predict.model));
    // The linearised predictive is computed in closed form, so only Monte
    // Carlo predictions need a sample count, or have samples to show.
    if (predict.linearized && predict.per_sample) {
      return absl::InvalidArgumentError(
          "flag --per-sample needs Monte Carlo samples; it cannot be combined "
          "with --linearized");
    }
    if (!predict.linearized && c.predict->count("--samples") == 0) {
      return absl::InvalidArgumentError(
          "'predict' needs the flag --samples (or --linearized)");
    }
    return predict;
  }
  if (c.acquire->parsed()) {
    const AcquireCommand& acquire = c.acquire_args;
    BNN_RETURN_IF_ERROR(
        CheckOneTarget("acquire", acquire.snapshot_id, acquire.model));
    if (acquire.dataset_id.empty() == acquire.csv_path.empty()) {
      return absl::InvalidArgumentError(
          "'acquire' needs exactly one pool: --dataset ID or --csv FILE");
    }
    if (!acquire.csv_path.empty() && acquire.dataset_version.has_value()) {
      return absl::InvalidArgumentError(
          "flag --version needs --dataset (a CSV pool has no versions)");
    }
    return acquire;
  }
  if (c.evaluate->parsed()) {
    const EvaluateCommand& evaluate = c.evaluate_args;
    BNN_RETURN_IF_ERROR(
        CheckOneTarget("evaluate", evaluate.snapshot_id, evaluate.model));
    if (evaluate.dataset_id.empty() == evaluate.csv_path.empty()) {
      return absl::InvalidArgumentError(
          "'evaluate' needs exactly one source of labelled rows: --dataset "
          "ID or --csv FILE");
    }
    if (!evaluate.csv_path.empty() && evaluate.target.empty()) {
      return absl::InvalidArgumentError(
          "'evaluate --csv' needs --target COL, the column of the labels");
    }
    if (evaluate.csv_path.empty() && !evaluate.target.empty()) {
      return absl::InvalidArgumentError(
          "flag --target needs --csv (a stored dataset has its targets)");
    }
    if (!evaluate.csv_path.empty() && evaluate.dataset_version.has_value()) {
      return absl::InvalidArgumentError(
          "flag --version needs --dataset (a CSV file has no versions)");
    }
    if (!evaluate.ood_dataset_id.empty() && !evaluate.ood_csv_path.empty()) {
      return absl::InvalidArgumentError(
          "'evaluate' takes at most one of --ood-dataset and --ood-csv");
    }
    if (evaluate.csv_path == "-" && evaluate.ood_csv_path == "-") {
      return absl::InvalidArgumentError(
          "--csv and --ood-csv cannot both read standard input");
    }
    return evaluate;
  }
  if (c.snapshots->parsed()) return c.snapshots_args;
  if (c.snapshot->parsed()) return c.snapshot_args;
  if (c.delete_snapshot->parsed()) return c.delete_snapshot_args;
  if (c.export_snapshot->parsed()) {
    BNN_RETURN_IF_ERROR(CheckOneTarget("export", c.export_args.snapshot_id,
                                       c.export_args.model));
    return c.export_args;
  }
  if (c.models->parsed()) return c.models_args;
  if (c.publish->parsed()) return c.publish_args;
  if (c.alias->parsed()) {
    const bool has_version = c.alias->count("VERSION") > 0;
    if (c.alias_args.remove == has_version) {
      return absl::InvalidArgumentError(
          "'alias' needs a VERSION to point the alias at, or --delete (not "
          "both)");
    }
    return c.alias_args;
  }
  if (c.delete_model->parsed()) return c.delete_model_args;
  if (c.delete_dataset->parsed()) return c.delete_dataset_args;
  if (c.import_snapshot->parsed()) return c.import_args;
  if (c.methods->parsed()) return MethodsCommand{};
  if (c.health->parsed()) return HealthCommand{};
  if (c.token_create->parsed()) return c.token_create_args;
  if (c.plot->parsed()) {
    PlotCommand plot = c.plot_args;
    plot.kind = c.plot_loss->parsed()    ? "loss"
                : c.plot_bands->parsed() ? "bands"
                                         : "reliability";
    if (plot.csv_path == "-") {
      return absl::InvalidArgumentError(
          "'plot' reads --csv itself: give a file, not '-' (standard input)");
    }
    return plot;
  }
  if (c.help->parsed()) {
    // app.help() would show the help of the parsed command, `help` itself.
    if (c.help_topic.empty()) {
      return TextCommand{app.get_formatter()->make_help(
          &app, app.get_name(), CLI::AppFormatMode::Normal)};
    }
    for (const CLI::App* command : app.get_subcommands({})) {
      if (command->get_name() == c.help_topic) {
        return TextCommand{command->help(app.get_name())};
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat("help: unknown command '", c.help_topic, "'"));
  }
  return absl::InvalidArgumentError(
      "missing command (bnnctl --help lists them)");
}

std::string CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) {
    names.push_back(command->get_name());
  }
  return absl::StrJoin(names, ", ");
}

// The error for arguments no command or flag took (CLI11's "extras"),
// `command` being the parsed command if any.
absl::Status UnexpectedArguments(const CLI::App& app, const CLI::App* command,
                                 const std::vector<std::string>& extras) {
  const std::string& first = extras.front();
  if (absl::StartsWith(first, "-")) {
    absl::string_view flag = first;
    flag = flag.substr(0, flag.find('='));
    if (command == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag ", flag, " (bnnctl --help)"));
    }
    // The command's own flags are only known after it.
    if (command->get_option_no_throw(std::string(flag)) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag ", flag, " of '", command->get_name(),
                       "' must follow the command"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flag ", flag, " for '", command->get_name(),
                     "' (bnnctl ", command->get_name(), " --help)"));
  }
  if (command == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown command '", first, "'; commands: ", CommandNames(app)));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unexpected argument '", first, "' for '", command->get_name(),
      "' (bnnctl ", command->get_name(), " --help)"));
}

const CLI::App* ParsedCommand(const CLI::App& app) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  return parsed.empty() ? nullptr : parsed.front();
}

bool Given(const CLI::Option* option) {
  return option != nullptr && option->count() > 0;
}

// -h/--help given to the app or to the parsed command.
bool HelpGiven(const CLI::App& app) {
  const CLI::App* command = ParsedCommand(app);
  return Given(app.get_help_ptr()) ||
         (command != nullptr && Given(command->get_help_ptr()));
}

}  // namespace

absl::StatusOr<Invocation> ParseBnnctlArgs(
    const std::vector<std::string>& args) {
  Invocation invocation;
  CLI::App app("bnnctl: the command-line client of bnn-server", "bnnctl");
  // Global flags may also follow the command: the command hands what it
  // does not know to the app ("fallthrough", inherited by every command).
  // Leftover arguments are collected rather than thrown at once, so that an
  // unknown flag is reported before a missing one.
  app.fallthrough();
  app.allow_extras();
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", BnnctlVersion(),
                       "Print the version and build commit");
  app.footer(
      "Global flags may come before or after the command. BNN_SERVER and "
      "BNN_TOKEN set --server and --token when those are not given.\n"
      "Every CSV path may be '-' (standard input).\n"
      "Exit status: 0 on success, 1 on a failed request or job, 2 on a usage "
      "error.");
  AddGlobalFlags(&app, &invocation.global);
  Commands commands;
  AddCommands(&app, &commands);
  for (CLI::App* command : app.get_subcommands({})) {
    command->footer(
        "Global flags (bnnctl --help): --server, --json, "
        "--timeout, --token, --tls-ca, --tls-cert, --tls-key.");
  }

  // CLI11 takes the arguments last first.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    // help() shows the parsed command's help, if any.
    invocation.command = TextCommand{app.help()};
    return invocation;
  } catch (const CLI::CallForVersion& version) {
    invocation.command = TextCommand{absl::StrCat(version.what(), "\n")};
    return invocation;
  } catch (const CLI::ParseError& error) {
    // CLI11 checks values before it looks for --help and --version; they
    // still win over a bad value.
    if (HelpGiven(app)) {
      invocation.command = TextCommand{app.help()};
      return invocation;
    }
    if (Given(app.get_version_ptr())) {
      invocation.command = TextCommand{absl::StrCat(BnnctlVersion(), "\n")};
      return invocation;
    }
    if (!app.remaining().empty()) {
      return UnexpectedArguments(app, ParsedCommand(app), app.remaining());
    }
    return absl::InvalidArgumentError(error.what());
  }
  if (!app.remaining().empty()) {
    return UnexpectedArguments(app, ParsedCommand(app), app.remaining());
  }
  absl::StatusOr<Command> command = BuildCommand(app, commands);
  if (!command.ok()) return command.status();
  invocation.command = *std::move(command);
  return invocation;
}

}  // namespace bnn::client
