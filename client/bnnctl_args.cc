#include "client/bnnctl_args.h"

#include <cmath>
#include <utility>

#include <absl/strings/match.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/strings/string_view.h>

#include "bnn/methods/options.h"

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
        {"param", true, true}}},
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
        {"target", true, false}}},
      {"methods", 0, "", {}},
      {"datasets", 0, "", {}},
      {"dataset", 1, "DATASET_ID", {}},
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
  absl::StatusOr<std::string> name = Required(raw, "name");
  if (!name.ok()) return name.status();
  absl::StatusOr<std::string> task = Required(raw, "task");
  if (!task.ok()) return task.status();
  absl::StatusOr<std::string> csv = Required(raw, "csv");
  if (!csv.ok()) return csv.status();
  absl::StatusOr<std::string> target = Required(raw, "target");
  if (!target.ok()) return target.status();
  if (*task != "regression" && *task != "classification") {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --task must be regression or classification, got '", *task, "'"));
  }
  upload.name = *std::move(name);
  upload.classification = (*task == "classification");
  upload.csv_path = *std::move(csv);
  upload.target = *std::move(target);
  return upload;
}

absl::StatusOr<Command> BuildTrain(const RawArgs& raw) {
  TrainCommand train;
  absl::StatusOr<std::string> dataset = Required(raw, "dataset");
  if (!dataset.ok()) return dataset.status();
  absl::StatusOr<std::string> method = Required(raw, "method");
  if (!method.ok()) return method.status();
  absl::StatusOr<std::string> hidden = Required(raw, "hidden");
  if (!hidden.ok()) return hidden.status();
  absl::StatusOr<std::string> epochs = Required(raw, "epochs");
  if (!epochs.ok()) return epochs.status();

  train.dataset_id = *std::move(dataset);
  train.method = *std::move(method);
  absl::StatusOr<std::vector<int>> sizes = ParseHiddenSizes(*hidden);
  if (!sizes.ok()) return sizes.status();
  train.hidden_sizes = *std::move(sizes);
  absl::StatusOr<int> num_epochs = ParsePositiveInt("epochs", *epochs);
  if (!num_epochs.ok()) return num_epochs.status();
  train.epochs = *num_epochs;
  if (const std::string* value = raw.Get("activation")) {
    absl::StatusOr<std::vector<std::string>> activations =
        ParseActivations(*value);
    if (!activations.ok()) return activations.status();
    train.activations = *std::move(activations);
  }
  if (const std::string* value = raw.Get("seed")) {
    absl::StatusOr<uint64_t> seed = ParseSeed("seed", *value);
    if (!seed.ok()) return seed.status();
    train.seed = *seed;
  }
  if (auto it = raw.flags.find("param"); it != raw.flags.end()) {
    for (const std::string& assignment : it->second) {
      ParamMap one;
      if (absl::Status status = ParseParamAssignment(assignment, &one);
          !status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --param: ", status.message()));
      }
      auto [entry, inserted] = train.params.insert(*one.begin());
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --param: '", entry->first, "' given more than once"));
      }
    }
  }
  return train;
}

absl::StatusOr<Command> BuildJob(const RawArgs& raw) {
  JobCommand job;
  job.job_id = raw.positionals.front();
  job.wait = raw.Has("wait");
  if (const std::string* value = raw.Get("wait-timeout")) {
    if (!job.wait) {
      return absl::InvalidArgumentError(
          "flag --wait-timeout needs --wait as well");
    }
    absl::StatusOr<double> seconds =
        ParsePositiveSeconds("wait-timeout", *value);
    if (!seconds.ok()) return seconds.status();
    job.wait_timeout_seconds = *seconds;
  }
  return job;
}

absl::StatusOr<Command> BuildPredict(const RawArgs& raw) {
  PredictCommand predict;
  absl::StatusOr<std::string> snapshot = Required(raw, "snapshot");
  if (!snapshot.ok()) return snapshot.status();
  absl::StatusOr<std::string> csv = Required(raw, "csv");
  if (!csv.ok()) return csv.status();
  absl::StatusOr<std::string> samples = Required(raw, "samples");
  if (!samples.ok()) return samples.status();
  predict.snapshot_id = *std::move(snapshot);
  predict.csv_path = *std::move(csv);
  absl::StatusOr<int> num_samples = ParsePositiveInt("samples", *samples);
  if (!num_samples.ok()) return num_samples.status();
  predict.num_samples = *num_samples;
  if (const std::string* value = raw.Get("seed")) {
    absl::StatusOr<uint64_t> seed = ParseSeed("seed", *value);
    if (!seed.ok()) return seed.status();
    predict.seed = *seed;
  }
  if (raw.Has("target")) {
    absl::StatusOr<std::string> target = Required(raw, "target");
    if (!target.ok()) return target.status();
    predict.target = *std::move(target);
  }
  return predict;
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
  absl::StatusOr<Command> command;
  if (name == "upload") {
    command = BuildUpload(raw);
  } else if (name == "train") {
    command = BuildTrain(raw);
  } else if (name == "job") {
    command = BuildJob(raw);
  } else if (name == "cancel") {
    command = CancelCommand{raw.positionals.front()};
  } else if (name == "predict") {
    command = BuildPredict(raw);
  } else if (name == "methods") {
    command = MethodsCommand{};
  } else if (name == "datasets") {
    command = DatasetsCommand{};
  } else {
    command = DatasetCommand{raw.positionals.front()};
  }
  if (!command.ok()) return command.status();
  invocation.command = *std::move(command);
  return invocation;
}

const char* BnnctlUsage() {
  return R"(usage: bnnctl [--server HOST:PORT] [--json] [--timeout SECONDS] COMMAND ...

Commands:
  upload   --name N --task regression|classification --csv FILE --target COL
           Upload a CSV (header line; COL is a header name or 0-based index).
  train    --dataset ID --method NAME --hidden 50[,50...]|none
           [--activation relu[,tanh...]] --epochs E [--seed S]
           [--param key=value ...]
           Start a training job; prints its id.
  job      ID [--wait [--wait-timeout SECONDS]]
           Show a job; --wait polls until it finishes (default limit 3600 s).
  cancel   ID
           Cancel a queued or running job.
  predict  --snapshot ID --csv FILE --samples S [--seed S] [--target COL]
           Predictive mean and std (regression) or class probabilities for
           every row of FILE; all columns are features except --target.
  methods  List the inference methods and their parameters.
  datasets List the stored datasets.
  dataset  ID
           Show one dataset.
  help     Show this text.

Global flags (before or after the command):
  --server HOST:PORT  server address (default 127.0.0.1:50051)
  --json              machine-readable JSON on stdout
  --timeout SECONDS   deadline of each RPC (default 30)

Exit status: 0 on success, 1 on a failed request or job, 2 on a usage error.
)";
}

}  // namespace bnn::client
