#include "client/bnnctl_args.h"

#include <cmath>
#include <initializer_list>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>

#include "bnn/methods/options.h"
#include "bnn/predict/acquisition.h"

namespace bnn::client {
namespace {

struct FlagSpec {
  absl::string_view name;
  bool takes_value;
  bool repeatable;
};

struct CommandSpec {
  absl::string_view name;
  // Number of positional arguments and their name for messages.
  int num_positionals;
  absl::string_view positional_name;
  std::vector<FlagSpec> flags;
};

const std::vector<FlagSpec>& GlobalFlagSpecs() {
  static const auto* const kFlags = new std::vector<FlagSpec>{
      {"server", true, false},
      {"json", false, false},
      {"timeout", true, false},
      {"help", false, false},
  };
  return *kFlags;
}

const std::vector<CommandSpec>& CommandSpecs() {
  static const auto* const kCommands = new std::vector<CommandSpec>{
      {"upload",
       0,
       "",
       {{"name", true, false},
        {"task", true, false},
        {"csv", true, false},
        {"target", true, false}}},
      {"train",
       0,
       "",
       {{"dataset", true, false},
        {"method", true, false},
        {"hidden", true, false},
        {"activation", true, false},
        {"epochs", true, false},
        {"seed", true, false},
        {"param", true, true},
        {"dataset-version", true, false},
        {"parent", true, false},
        {"prior-from-parent", false, false}}},
      {"job",
       1,
       "JOB_ID",
       {{"wait", false, false}, {"wait-timeout", true, false}}},
      {"cancel", 1, "JOB_ID", {}},
      {"predict",
       0,
       "",
       {{"snapshot", true, false},
        {"csv", true, false},
        {"samples", true, false},
        {"seed", true, false},
        {"target", true, false},
        {"linearized", false, false},
        {"quantiles", true, false},
        {"per-sample", false, false}}},
      {"acquire",
       0,
       "",
       {{"snapshot", true, false},
        {"dataset", true, false},
        {"version", true, false},
        {"csv", true, false},
        {"k", true, false},
        {"heuristic", true, false},
        {"samples", true, false},
        {"seed", true, false},
        {"diversity-power", true, false}}},
      {"methods", 0, "", {}},
      {"datasets", 0, "", {}},
      {"dataset", 1, "DATASET_ID", {{"version", true, false}}},
      {"append",
       0,
       "",
       {{"dataset", true, false},
        {"csv", true, false},
        {"target", true, false},
        {"expected-version", true, false}}},
      {"snapshots", 0, "", {{"dataset", true, false}}},
      {"snapshot", 1, "SNAPSHOT_ID", {}},
      {"delete-snapshot", 1, "SNAPSHOT_ID", {}},
      {"export", 0, "", {{"snapshot", true, false}, {"out", true, false}}},
      {"import", 0, "", {{"in", true, false}}},
      {"help", 0, "", {}},
  };
  return *kCommands;
}

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& spec : CommandSpecs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const FlagSpec* FindFlag(const std::vector<FlagSpec>& flags,
                         absl::string_view name) {
  for (const FlagSpec& flag : flags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

std::string FlagList(const std::vector<FlagSpec>& flags) {
  std::vector<std::string> names;
  for (const FlagSpec& flag : flags)
    names.push_back(absl::StrCat("--", flag.name));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

// The command line split into its command, positionals and flag values (an
// empty string for a boolean flag).
struct RawArgs {
  const CommandSpec* command = nullptr;
  std::vector<std::string> positionals;
  std::map<std::string, std::vector<std::string>, std::less<>> flags;

  bool Has(absl::string_view flag) const { return flags.count(flag) > 0; }
  // The value of a non-repeatable flag, or nullptr when absent.
  const std::string* Get(absl::string_view flag) const {
    auto it = flags.find(flag);
    return it == flags.end() ? nullptr : &it->second.front();
  }
};

absl::StatusOr<RawArgs> Tokenize(const std::vector<std::string>& args) {
  RawArgs raw;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& token = args[i];
    if (token == "-h") {
      raw.flags["help"].push_back("");
      continue;
    }
    if (!absl::StartsWith(token, "--") || token == "--") {
      if (absl::StartsWith(token, "-") && token.size() > 1) {
        return absl::InvalidArgumentError(absl::StrCat("unknown flag ", token));
      }
      if (raw.command == nullptr) {
        raw.command = FindCommand(token);
        if (raw.command == nullptr) {
          std::vector<absl::string_view> names;
          for (const CommandSpec& spec : CommandSpecs()) {
            names.push_back(spec.name);
          }
          return absl::InvalidArgumentError(
              absl::StrCat("unknown command '", token,
                           "'; commands: ", absl::StrJoin(names, ", ")));
        }
      } else {
        raw.positionals.push_back(token);
      }
      continue;
    }

    absl::string_view body = absl::string_view(token).substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != absl::string_view::npos) {
      inline_value = std::string(body.substr(eq + 1));
      body = body.substr(0, eq);
    }
    const FlagSpec* flag = FindFlag(GlobalFlagSpecs(), body);
    if (flag == nullptr && raw.command != nullptr) {
      flag = FindFlag(raw.command->flags, body);
    }
    if (flag == nullptr) {
      if (raw.command == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag --", body, " before the command; ",
                         "global flags: ", FlagList(GlobalFlagSpecs())));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", body, " for '", raw.command->name,
                       "'; its flags: ", FlagList(raw.command->flags),
                       " (global: ", FlagList(GlobalFlagSpecs()), ")"));
    }
    std::string value;
    if (flag->takes_value) {
      if (inline_value.has_value()) {
        value = *std::move(inline_value);
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", body, " needs a value"));
      }
    } else if (inline_value.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", body, " takes no value"));
    }
    std::vector<std::string>& values = raw.flags[std::string(body)];
    if (!values.empty() && !flag->repeatable) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --", body, " given more than once"));
    }
    values.push_back(std::move(value));
  }
  return raw;
}

absl::StatusOr<std::string> Required(const RawArgs& raw,
                                     absl::string_view flag) {
  const std::string* value = raw.Get(flag);
  if (value == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", raw.command->name, "' needs the flag --", flag));
  }
  if (value->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, " must not be empty"));
  }
  return *value;
}

// Required() for several flags at once, each value stored in its
// destination; the first missing or empty flag is the error.
absl::Status GetRequired(
    const RawArgs& raw,
    std::initializer_list<std::pair<absl::string_view, std::string*>> flags) {
  for (const auto& [flag, destination] : flags) {
    absl::StatusOr<std::string> value = Required(raw, flag);
    if (!value.ok()) return value.status();
    *destination = *std::move(value);
  }
  return absl::OkStatus();
}

// A flag that may be left out, but not given empty.
absl::Status GetOptional(const RawArgs& raw, absl::string_view flag,
                         std::string* destination) {
  if (!raw.Has(flag)) return absl::OkStatus();
  return GetRequired(raw, {{flag, destination}});
}

absl::StatusOr<int> ParsePositiveInt(absl::string_view flag,
                                     absl::string_view value) {
  int out = 0;
  if (!absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, ": '", value, "' is not an integer"));
  }
  if (out < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, " must be >= 1, got ", out));
  }
  return out;
}

// Dataset versions count from 1.
absl::StatusOr<int64_t> ParseVersion(absl::string_view flag,
                                     absl::string_view value) {
  int64_t out = 0;
  if (!absl::SimpleAtoi(value, &out) || out < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --", flag, ": '", value, "' is not a version (an integer >= 1)"));
  }
  return out;
}

absl::StatusOr<uint64_t> ParseSeed(absl::string_view flag,
                                   absl::string_view value) {
  uint64_t out = 0;
  // SimpleAtoi would accept "-1" for an unsigned type by wrapping around on
  // some versions; reject signs explicitly.
  if (absl::StartsWith(value, "-") || absl::StartsWith(value, "+") ||
      !absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, ": '", value,
                     "' is not an integer in [0, 18446744073709551615]"));
  }
  return out;
}

absl::StatusOr<double> ParsePositiveSeconds(absl::string_view flag,
                                            absl::string_view value) {
  double out = 0;
  if (!absl::SimpleAtod(value, &out) || !std::isfinite(out) || out <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, ": '", value,
                     "' is not a positive number of seconds"));
  }
  return out;
}

absl::StatusOr<double> ParseNonNegative(absl::string_view flag,
                                        absl::string_view value) {
  double out = 0;
  if (!absl::SimpleAtod(value, &out) || !std::isfinite(out) || out < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --", flag, ": '", value, "' is not a number >= 0"));
  }
  return out;
}

// Stores parse(flag, value) in `out` when the flag is given; leaves `out`
// alone otherwise.
template <typename T, typename Out>
absl::Status ParseIfPresent(const RawArgs& raw, absl::string_view flag,
                            absl::StatusOr<T> (*parse)(absl::string_view,
                                                       absl::string_view),
                            Out* out) {
  const std::string* value = raw.Get(flag);
  if (value == nullptr) return absl::OkStatus();
  absl::StatusOr<T> parsed = parse(flag, *value);
  if (!parsed.ok()) return parsed.status();
  *out = *std::move(parsed);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseHiddenSizes(absl::string_view value) {
  std::vector<int> sizes;
  if (value == "none") return sizes;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    int width = 0;
    if (!absl::SimpleAtoi(part, &width) || width < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --hidden: '", part,
          "' is not a positive layer width (use e.g. 50,50, or none for no "
          "hidden layer)"));
    }
    sizes.push_back(width);
  }
  return sizes;
}

absl::StatusOr<std::vector<std::string>> ParseActivations(
    absl::string_view value) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --activation: empty name in '", value, "'"));
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
      return absl::InvalidArgumentError(
          absl::StrCat("flag --quantiles: '", part,
                       "' is not a level in (0, 1) (use e.g. 0.05,0.5,0.95)"));
    }
    levels.push_back(level);
  }
  return levels;
}

absl::Status ExpectPositionals(const RawArgs& raw) {
  const CommandSpec& spec = *raw.command;
  if (static_cast<int>(raw.positionals.size()) == spec.num_positionals) {
    return absl::OkStatus();
  }
  if (spec.num_positionals == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", spec.name, "' takes no positional argument, got '",
                     raw.positionals.front(), "'"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "'", spec.name, "' expects ", spec.num_positionals, " argument ",
      spec.positional_name, ", got ", raw.positionals.size()));
}

absl::StatusOr<Command> BuildUpload(const RawArgs& raw) {
  UploadCommand upload;
  std::string task;
  if (absl::Status status = GetRequired(raw, {{"name", &upload.name},
                                              {"task", &task},
                                              {"csv", &upload.csv_path},
                                              {"target", &upload.target}});
      !status.ok()) {
    return status;
  }
  if (task != "regression" && task != "classification") {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --task must be regression or classification, got '", task, "'"));
  }
  upload.classification = (task == "classification");
  return upload;
}

absl::Status ParseParams(const RawArgs& raw,
                         std::map<std::string, std::string>* params) {
  auto it = raw.flags.find("param");
  if (it == raw.flags.end()) return absl::OkStatus();
  for (const std::string& assignment : it->second) {
    ParamMap one;
    if (absl::Status status = ParseParamAssignment(assignment, &one);
        !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("flag --param: ", status.message()));
    }
    auto [entry, inserted] = params->insert(*one.begin());
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          "flag --param: '", entry->first, "' given more than once"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Command> BuildTrain(const RawArgs& raw) {
  TrainCommand train;
  std::string epochs;
  if (absl::Status status = GetRequired(
          raw, {{"dataset", &train.dataset_id}, {"method", &train.method}});
      !status.ok()) {
    return status;
  }
  if (absl::Status status =
          GetOptional(raw, "parent", &train.parent_snapshot_id);
      !status.ok()) {
    return status;
  }
  train.prior_from_parent = raw.Has("prior-from-parent");
  if (train.prior_from_parent && train.parent_snapshot_id.empty()) {
    return absl::InvalidArgumentError(
        "flag --prior-from-parent needs --parent as well");
  }
  // A warm start inherits its parent's architecture, so --hidden is only
  // required without a parent.
  if (train.parent_snapshot_id.empty() || raw.Has("hidden")) {
    absl::StatusOr<std::string> hidden = Required(raw, "hidden");
    if (!hidden.ok()) return hidden.status();
    absl::StatusOr<std::vector<int>> sizes = ParseHiddenSizes(*hidden);
    if (!sizes.ok()) return sizes.status();
    train.hidden_sizes = *std::move(sizes);
  }
  if (absl::Status status = GetRequired(raw, {{"epochs", &epochs}});
      !status.ok()) {
    return status;
  }
  absl::StatusOr<int> num_epochs = ParsePositiveInt("epochs", epochs);
  if (!num_epochs.ok()) return num_epochs.status();
  train.epochs = *num_epochs;
  if (const std::string* value = raw.Get("activation")) {
    absl::StatusOr<std::vector<std::string>> activations =
        ParseActivations(*value);
    if (!activations.ok()) return activations.status();
    train.activations = *std::move(activations);
  }
  for (absl::Status status :
       {ParseIfPresent(raw, "seed", ParseSeed, &train.seed),
        ParseIfPresent(raw, "dataset-version", ParseVersion,
                       &train.dataset_version),
        ParseParams(raw, &train.params)}) {
    if (!status.ok()) return status;
  }
  return train;
}

absl::StatusOr<Command> BuildJob(const RawArgs& raw) {
  JobCommand job;
  job.job_id = raw.positionals.front();
  job.wait = raw.Has("wait");
  if (raw.Has("wait-timeout") && !job.wait) {
    return absl::InvalidArgumentError(
        "flag --wait-timeout needs --wait as well");
  }
  if (absl::Status status = ParseIfPresent(
          raw, "wait-timeout", ParsePositiveSeconds, &job.wait_timeout_seconds);
      !status.ok()) {
    return status;
  }
  return job;
}

absl::StatusOr<Command> BuildPredict(const RawArgs& raw) {
  PredictCommand predict;
  if (absl::Status status = GetRequired(
          raw,
          {{"snapshot", &predict.snapshot_id}, {"csv", &predict.csv_path}});
      !status.ok()) {
    return status;
  }
  predict.linearized = raw.Has("linearized");
  predict.per_sample = raw.Has("per-sample");
  // The linearised predictive is computed in closed form, so only Monte
  // Carlo predictions need a sample count, or have samples to show.
  if (predict.linearized && predict.per_sample) {
    return absl::InvalidArgumentError(
        "flag --per-sample needs Monte Carlo samples; it cannot be combined "
        "with --linearized");
  }
  if (!predict.linearized) {
    absl::StatusOr<std::string> samples = Required(raw, "samples");
    if (!samples.ok()) return samples.status();
  }
  if (const std::string* value = raw.Get("quantiles")) {
    absl::StatusOr<std::vector<double>> levels = ParseQuantiles(*value);
    if (!levels.ok()) return levels.status();
    predict.quantiles = *std::move(levels);
  }
  for (absl::Status status :
       {GetOptional(raw, "target", &predict.target),
        ParseIfPresent(raw, "samples", ParsePositiveInt, &predict.num_samples),
        ParseIfPresent(raw, "seed", ParseSeed, &predict.seed)}) {
    if (!status.ok()) return status;
  }
  return predict;
}

absl::StatusOr<Command> BuildAcquire(const RawArgs& raw) {
  AcquireCommand acquire;
  std::string k;
  if (absl::Status status =
          GetRequired(raw, {{"snapshot", &acquire.snapshot_id},
                            {"k", &k},
                            {"heuristic", &acquire.heuristic}});
      !status.ok()) {
    return status;
  }
  if (raw.Has("dataset") == raw.Has("csv")) {
    return absl::InvalidArgumentError(
        "'acquire' needs exactly one pool: --dataset ID or --csv FILE");
  }
  if (raw.Has("csv") && raw.Has("version")) {
    return absl::InvalidArgumentError(
        "flag --version needs --dataset (a CSV pool has no versions)");
  }
  for (absl::Status status : {GetOptional(raw, "dataset", &acquire.dataset_id),
                              GetOptional(raw, "csv", &acquire.csv_path)}) {
    if (!status.ok()) return status;
  }
  if (absl::StatusOr<AcquisitionHeuristic> heuristic =
          StringToHeuristic(acquire.heuristic);
      !heuristic.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("flag --heuristic: ", heuristic.status().message()));
  }
  absl::StatusOr<int> num_rows = ParsePositiveInt("k", k);
  if (!num_rows.ok()) return num_rows.status();
  acquire.k = *num_rows;
  for (absl::Status status :
       {ParseIfPresent(raw, "version", ParseVersion, &acquire.dataset_version),
        ParseIfPresent(raw, "samples", ParsePositiveInt, &acquire.num_samples),
        ParseIfPresent(raw, "seed", ParseSeed, &acquire.seed),
        ParseIfPresent(raw, "diversity-power", ParseNonNegative,
                       &acquire.diversity_power)}) {
    if (!status.ok()) return status;
  }
  return acquire;
}

absl::StatusOr<Command> BuildDataset(const RawArgs& raw) {
  DatasetCommand dataset;
  dataset.dataset_id = raw.positionals.front();
  if (absl::Status status =
          ParseIfPresent(raw, "version", ParseVersion, &dataset.version);
      !status.ok()) {
    return status;
  }
  return dataset;
}

absl::StatusOr<Command> BuildAppend(const RawArgs& raw) {
  AppendCommand append;
  for (absl::Status status :
       {GetRequired(raw, {{"dataset", &append.dataset_id},
                          {"csv", &append.csv_path},
                          {"target", &append.target}}),
        ParseIfPresent(raw, "expected-version", ParseVersion,
                       &append.expected_version)}) {
    if (!status.ok()) return status;
  }
  return append;
}

absl::StatusOr<Command> BuildSnapshots(const RawArgs& raw) {
  SnapshotsCommand snapshots;
  if (absl::Status status = GetOptional(raw, "dataset", &snapshots.dataset_id);
      !status.ok()) {
    return status;
  }
  return snapshots;
}

absl::StatusOr<Command> BuildExport(const RawArgs& raw) {
  ExportCommand command;
  if (absl::Status status = GetRequired(
          raw,
          {{"snapshot", &command.snapshot_id}, {"out", &command.out_path}});
      !status.ok()) {
    return status;
  }
  return command;
}

absl::StatusOr<Command> BuildImport(const RawArgs& raw) {
  ImportCommand command;
  if (absl::Status status = GetRequired(raw, {{"in", &command.in_path}});
      !status.ok()) {
    return status;
  }
  return command;
}

}  // namespace

absl::StatusOr<Invocation> ParseBnnctlArgs(
    const std::vector<std::string>& args) {
  absl::StatusOr<RawArgs> parsed = Tokenize(args);
  if (!parsed.ok()) return parsed.status();
  const RawArgs& raw = *parsed;

  Invocation invocation;
  if (const std::string* server = raw.Get("server")) {
    if (server->empty()) {
      return absl::InvalidArgumentError("flag --server must not be empty");
    }
    invocation.global.server = *server;
  }
  invocation.global.json = raw.Has("json");
  if (const std::string* value = raw.Get("timeout")) {
    absl::StatusOr<double> seconds = ParsePositiveSeconds("timeout", *value);
    if (!seconds.ok()) return seconds.status();
    invocation.global.timeout_seconds = *seconds;
  }

  if (raw.Has("help") ||
      (raw.command != nullptr && raw.command->name == "help")) {
    invocation.command = HelpCommand{};
    return invocation;
  }
  if (raw.command == nullptr) {
    return absl::InvalidArgumentError("missing command");
  }
  if (absl::Status status = ExpectPositionals(raw); !status.ok()) {
    return status;
  }

  const absl::string_view name = raw.command->name;
  const std::string positional =
      raw.positionals.empty() ? "" : raw.positionals.front();
  absl::StatusOr<Command> command;
  if (name == "upload") {
    command = BuildUpload(raw);
  } else if (name == "train") {
    command = BuildTrain(raw);
  } else if (name == "job") {
    command = BuildJob(raw);
  } else if (name == "cancel") {
    command = CancelCommand{positional};
  } else if (name == "predict") {
    command = BuildPredict(raw);
  } else if (name == "acquire") {
    command = BuildAcquire(raw);
  } else if (name == "methods") {
    command = MethodsCommand{};
  } else if (name == "datasets") {
    command = DatasetsCommand{};
  } else if (name == "dataset") {
    command = BuildDataset(raw);
  } else if (name == "append") {
    command = BuildAppend(raw);
  } else if (name == "snapshots") {
    command = BuildSnapshots(raw);
  } else if (name == "snapshot") {
    command = SnapshotCommand{positional};
  } else if (name == "delete-snapshot") {
    command = DeleteSnapshotCommand{positional};
  } else if (name == "export") {
    command = BuildExport(raw);
  } else {
    command = BuildImport(raw);
  }
  if (!command.ok()) return command.status();
  invocation.command = *std::move(command);
  return invocation;
}

const char* BnnctlUsage() {
  return R"(usage: bnnctl [--server HOST:PORT] [--json] [--timeout SECONDS] COMMAND ...

Commands:
  upload    --name N --task regression|classification --csv FILE --target COL
            Upload a CSV (header line; COL is a header name or 0-based index).
  append    --dataset ID --csv FILE --target COL [--expected-version V]
            Append labelled rows, creating the dataset's next version; with
            --expected-version, fail unless V is still the latest.
  datasets  List the stored datasets.
  dataset   ID [--version V]
            Show one dataset (its latest version unless --version).
  train     --dataset ID --method NAME --hidden 50[,50...]|none
            [--activation relu[,tanh...]] --epochs E [--seed S]
            [--param key=value ...] [--dataset-version V]
            [--parent SNAPSHOT [--prior-from-parent]]
            Start a training job; prints its id. --parent warm-starts from a
            snapshot (whose architecture is used: --hidden may be left out);
            --prior-from-parent also makes its posterior the prior.
  job       ID [--wait [--wait-timeout SECONDS]]
            Show a job; --wait polls until it finishes (default limit 3600 s).
  cancel    ID
            Cancel a queued or running job.
  predict   --snapshot ID --csv FILE (--samples S | --linearized) [--seed S]
            [--target COL] [--quantiles 0.05,0.5,0.95] [--per-sample]
            Predictive mean and std (regression) or class probabilities,
            entropy and mutual information for every row of FILE; all
            columns are features except --target. --linearized: the
            closed-form GLM predictive (regression); --quantiles: predictive
            quantiles (regression); --per-sample: every sample's output.
  acquire   --snapshot ID (--dataset ID [--version V] | --csv FILE) --k K
            --heuristic max_variance|entropy|bald|margin|random [--samples S]
            [--seed S] [--diversity-power P]
            The K pool rows to label next, best first. P > 0 draws them at
            random with probability proportional to score^P (diverse batches).
  snapshots [--dataset ID]
            List the stored snapshots (those trained on one dataset).
  snapshot  ID
            Show one snapshot.
  delete-snapshot ID
            Delete a snapshot.
  export    --snapshot ID --out FILE
            Download a snapshot file (written only once complete).
  import    --in FILE
            Upload a snapshot file; prints the stored snapshot and its new id.
  methods   List the inference methods and their parameters.
  help      Show this text.

Global flags (before or after the command):
  --server HOST:PORT  server address (default 127.0.0.1:50051)
  --json              machine-readable JSON on stdout
  --timeout SECONDS   deadline of each RPC (default 30)

Exit status: 0 on success, 1 on a failed request or job, 2 on a usage error.
)";
}

}  // namespace bnn::client
