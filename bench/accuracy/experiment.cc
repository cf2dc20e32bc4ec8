#include "bench/accuracy/experiment.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <omp.h>
#include <optional>
#include <stdio.h>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include <Eigen/Core>

#include "bnn/io/file.h"
#include "bnn/methods/registry.h"
#include "bnn/random.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "bench/common/provenance.h"

namespace bnn::experiment {
namespace {

// Output of a shell command, or nullopt if it could not run or failed.
std::optional<std::string> CommandOutput(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  if (pclose(pipe) != 0) return std::nullopt;
  return out;
}

// Quotes an argument for a POSIX shell when it needs it, so the recorded
// command line can be pasted back.
std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() &&
      arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"
                            "XYZ0123456789-_=./,:+@%") == std::string::npos) {
    return arg;
  }
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// "%.4g" keeps 4 significant digits for metrics spanning 1e-4 (KL of full
// methods) to 1e4 (KL of mean-field methods on Australian).
std::string Format(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.4g", v) : "n/a";
}

Json ParamsJson(const ParamMap& params) {
  Json out = Json::object();
  for (const auto& [k, v] : params) out[k] = v;
  return out;
}

}  // namespace

RunInfo CollectRunInfo(int argc, char** argv) {
  RunInfo info;
  info.build = bench::ProvenanceJson();
  info.build_commit = info.build.value("commit", "unknown");
  info.build_tree_clean = info.build.value("tree_clean", false);
  const std::string git = absl::StrCat("git -C ", ShellQuote(BNN_SOURCE_DIR));
  if (auto head = CommandOutput(git + " rev-parse HEAD 2>/dev/null")) {
    info.git_commit = std::string(absl::StripAsciiWhitespace(*head));
  } else {
    info.git_commit = "unknown";
  }
  if (auto status = CommandOutput(
          git + " status --porcelain -- core bench/accuracy 2>/dev/null")) {
    for (absl::string_view line : absl::StrSplit(*status, '\n')) {
      if (line.size() > 3) info.modified_sources.emplace_back(line.substr(3));
    }
  }
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) args.push_back(ShellQuote(argv[i]));
  info.command_line = absl::StrJoin(args, " ");
  info.started_at = UtcNow();
  return info;
}

void DeclareCommonFlags(int default_test_samples, FlagSet* flags) {
  flags->Flag("method", "inference method (registry name, e.g. slang)")
      .RepeatableFlag("param",
                      "k=v method or trainer parameter (epochs, standardize)")
      .Flag("hidden",
            "hidden widths, comma-separated; 0 = no hidden layer (default: "
            "the mode's)")
      .Flag("activation", "hidden activation", "relu")
      .Flag("splits", "use the first K splits; 0 = all", "0")
      .Flag("threads", "splits trained in parallel", "1")
      .Flag("seed", "seed of every random stream of the run", "0")
      .Flag("json-out", "write the JSON record here")
      .Flag("test-samples", "posterior samples of the test predictive",
            absl::StrCat(default_test_samples))
      .RepeatableFlag("tune",
                      "key=v1,v2,... (a+b=... ties a and b): grid searched by "
                      "K-fold cross-validation on each training split")
      .Flag("folds", "cross-validation folds for --tune", "5");
}

absl::StatusOr<ReferenceFlags> ParseReferenceFlags(const FlagSet& flags) {
  ReferenceFlags parsed;
  parsed.method = flags.Get("reference");
  if (parsed.method == "none") parsed.method.clear();
  for (const std::string& list : flags.GetAll("reference-params")) {
    for (absl::string_view assignment : absl::StrSplit(list, ',')) {
      BNN_RETURN_IF_ERROR(ParseParamAssignment(assignment, &parsed.overrides));
    }
  }
  return parsed;
}

absl::StatusOr<CommonOptions> ParseCommonFlags(const FlagSet& flags) {
  CommonOptions common;
  BNN_ASSIGN_OR_RETURN(common.method, flags.GetRequired("method"));
  for (const std::string& assignment : flags.GetAll("param")) {
    BNN_RETURN_IF_ERROR(ParseParamAssignment(assignment, &common.params));
  }
  if (common.params.count("seed") > 0) {
    return absl::InvalidArgumentError(
        "set the seed with --seed: each split derives its training seed from "
        "it");
  }
  if (flags.Has("hidden")) {
    common.hidden_given = true;
    for (absl::string_view width : absl::StrSplit(flags.Get("hidden"), ',')) {
      int w = 0;
      if (!absl::SimpleAtoi(width, &w) || w < 0 || w > kMaxLayerWidth) {
        return absl::InvalidArgumentError(
            absl::StrCat("--hidden: '", width, "' is not a width in [0, ",
                         kMaxLayerWidth, "]"));
      }
      if (w > 0) common.hidden_sizes.push_back(w);
    }
  }
  BNN_ASSIGN_OR_RETURN(common.activation,
                       StringToActivation(flags.Get("activation")));
  BNN_ASSIGN_OR_RETURN(const int64_t splits,
                       flags.GetInt("splits", 0, 1 << 20));
  BNN_ASSIGN_OR_RETURN(const int64_t threads, flags.GetInt("threads", 1, 256));
  BNN_ASSIGN_OR_RETURN(const int64_t samples,
                       flags.GetInt("test-samples", 1, 4096));
  BNN_ASSIGN_OR_RETURN(const int64_t folds, flags.GetInt("folds", 2, 100));
  common.max_splits = static_cast<int>(splits);
  common.threads = static_cast<int>(threads);
  common.test_samples = static_cast<int>(samples);
  common.folds = static_cast<int>(folds);
  if (!absl::SimpleAtoi(flags.Get("seed"), &common.seed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--seed = '", flags.Get("seed"), "' is not a uint64"));
  }
  common.json_out = flags.Get("json-out");
  BNN_ASSIGN_OR_RETURN(common.grid, ParseTuningGrid(flags.GetAll("tune")));

  // Check every configuration that will be trained before training any.
  const MethodRegistry& registry = MethodRegistry::Builtin();
  for (int64_t p = 0; p < (common.grid.empty() ? 1 : common.grid.size()); ++p) {
    ParamMap params = common.params;
    if (!common.grid.empty()) {
      for (const auto& [key, value] : common.grid.Point(p)) {
        if (params.count(key) > 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("'", key, "' is given by both --param and --tune"));
        }
        params[key] = value;
      }
    }
    BNN_RETURN_IF_ERROR(CheckTrainParams(common.method, params, registry));
  }
  return common;
}

uint64_t StreamSeed(uint64_t run_seed, int split, Stream stream) {
  return Rng(run_seed)
      .Fork(static_cast<uint64_t>(split))
      .Fork(static_cast<uint64_t>(stream))
      .seed();
}

absl::StatusOr<Snapshot> TrainModel(const std::string& method,
                                    const ParamMap& params,
                                    const std::vector<int>& hidden_sizes,
                                    Activation activation, const Dataset& data,
                                    uint64_t seed,
                                    const ProgressCallback& progress) {
  TrainRequest request;
  request.method = method;
  request.params = params;
  request.params["seed"] = absl::StrCat(seed);
  request.hidden_sizes = hidden_sizes;
  request.activations = {activation};
  return Train(request, data, MethodRegistry::Builtin(), progress);
}

ProgressCallback LossCurve::Callback() {
  return [this](const TrainProgress& p) {
    const int64_t stride = std::max<int64_t>(1, p.total_steps / points_);
    if (p.step % stride != 0 && p.step != p.total_steps) return;
    // Called after the step and again after the pass that ends with it:
    // the later call's loss (the pass's mean) replaces the earlier.
    if (!curve_.empty() && curve_.back().first == p.step) {
      curve_.back().second = p.loss;
    } else {
      curve_.emplace_back(p.step, p.loss);
    }
  };
}

Json LossCurve::ToJson() const {
  Json out = Json::array();
  for (const auto& [step, loss] : curve_) out.push_back({step, loss});
  return out;
}

absl::StatusOr<ParamMap> SelectParams(const CommonOptions& common,
                                      const Dataset& train, int split,
                                      const std::string& score_name,
                                      const FoldScore& score,
                                      SplitOutcome* outcome) {
  ParamMap params = common.params;
  if (common.grid.empty()) return params;
  BNN_ASSIGN_OR_RETURN(
      const TuningResult tuning,
      CrossValidate(common.grid, train, common.folds,
                    StreamSeed(common.seed, split, Stream::kTuning), score));
  Json points = Json::array();
  for (const GridPointScore& point : tuning.points) {
    Json entry;
    entry["params"] = ParamsJson(point.params);
    entry[score_name] = point.mean;
    entry["fold_scores"] = point.fold_scores;
    if (!point.error.empty()) entry["error"] = point.error;
    points.push_back(std::move(entry));
  }
  outcome->details["tuning"] = {{"score", score_name},
                                {"folds", common.folds},
                                {"points", std::move(points)}};
  outcome->chosen = tuning.best;
  for (const auto& [key, value] : tuning.best) params[key] = value;
  return params;
}

void DeclareSplitsStateFlag(FlagSet* flags) {
  flags
      ->Flag("splits-state",
             "keep every finished split in this file; the same command run "
             "again skips the splits it holds (deleted when the run "
             "finishes)")
      .Flag("stop-after-splits",
            "with --splits-state: stop once this many splits were kept, as a "
            "preempted run would (a test of resuming); 0 = never",
            "0");
}

absl::StatusOr<SplitsState> ParseSplitsState(const FlagSet& flags,
                                             const RunInfo& info) {
  SplitsState state;
  state.path = flags.Get("splits-state");
  BNN_ASSIGN_OR_RETURN(const int64_t stop_after,
                       flags.GetInt("stop-after-splits", 0, 1 << 20));
  if (stop_after > 0 && state.path.empty()) {
    return absl::InvalidArgumentError(
        "--stop-after-splits needs --splits-state");
  }
  state.stop_after = static_cast<int>(stop_after);
  state.identity =
      absl::StrCat(info.build.dump(), " ",
                   flags.Canonical({"json-out", "threads", "splits-state",
                                    "stop-after-splits"}));
  return state;
}

namespace {

Json SplitOutcomeToJson(const SplitOutcome& o) {
  Json metrics = Json::object();
  for (const auto& [name, value] : o.metrics) metrics[name] = value;
  return {{"split", o.split},
          {"seconds", o.seconds},
          {"metrics", std::move(metrics)},
          {"chosen", ParamsJson(o.chosen)},
          {"details", o.details}};
}

absl::StatusOr<SplitOutcome> SplitOutcomeFromJson(const Json& j) {
  if (!j.is_object() || !j.contains("split") || !j["split"].is_number() ||
      !j.contains("metrics") || !j["metrics"].is_object()) {
    return absl::DataLossError("a split entry lacks split or metrics");
  }
  SplitOutcome o;
  o.split = j["split"].get<int>();
  o.seconds = j.value("seconds", 0.0);
  for (const auto& [name, value] : j["metrics"].items()) {
    // JSON has no NaN: nlohmann writes it as null.
    o.metrics.emplace_back(
        name, value.is_number() ? value.get<double>() : std::nan(""));
  }
  const Json chosen = j.value("chosen", Json::object());
  for (const auto& [key, value] : chosen.items()) {
    if (!value.is_string()) {
      return absl::DataLossError(
          absl::StrCat("chosen parameter ", key, " is not a string"));
    }
    o.chosen[key] = value.get<std::string>();
  }
  o.details = j.value("details", Json::object());
  return o;
}

// The outcomes `state` holds, by split; empty without a state file.
absl::StatusOr<std::map<int, SplitOutcome>> ReadSplitsState(
    const SplitsState& state, int num_splits) {
  std::map<int, SplitOutcome> done;
  if (state.path.empty()) return done;
  absl::StatusOr<std::string> text = ReadFile(state.path);
  if (absl::IsNotFound(text.status())) return done;
  if (!text.ok()) return text.status();
  const Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("identity") || !j.contains("splits") ||
      !j["splits"].is_array()) {
    return absl::DataLossError(
        absl::StrCat(state.path, " is not a --splits-state file"));
  }
  if (j["identity"] != state.identity) {
    return absl::FailedPreconditionError(absl::StrCat(
        state.path,
        " holds the splits of another run (its binary or flags differ: ",
        j["identity"].dump(), "); delete it to start this run afresh"));
  }
  for (const Json& entry : j["splits"]) {
    absl::StatusOr<SplitOutcome> o = SplitOutcomeFromJson(entry);
    if (!o.ok()) {
      return absl::DataLossError(
          absl::StrCat(state.path, ": ", o.status().message()));
    }
    if (o->split < 0 || o->split >= num_splits) {
      return absl::FailedPreconditionError(
          absl::StrCat(state.path, " holds split ", o->split, " of a run of ",
                       num_splits, " splits"));
    }
    done[o->split] = *std::move(o);
  }
  return done;
}

absl::Status WriteSplitsState(const SplitsState& state,
                              const std::map<int, SplitOutcome>& done) {
  Json splits = Json::array();
  for (const auto& [k, o] : done) splits.push_back(SplitOutcomeToJson(o));
  const Json j = {{"identity", state.identity}, {"splits", std::move(splits)}};
  return WriteFileAtomically(state.path, j.dump());
}

}  // namespace

absl::StatusOr<std::vector<SplitOutcome>> RunSplits(int num_splits, int threads,
                                                    const SplitFn& fn,
                                                    const SplitsState& state) {
  using Done = std::map<int, SplitOutcome>;
  BNN_ASSIGN_OR_RETURN(Done done, ReadSplitsState(state, num_splits));
  if (!done.empty()) {
    std::cerr << "resuming from " << state.path << ": " << done.size() << " of "
              << num_splits << " splits done" << std::endl;
  }
  std::vector<std::optional<absl::StatusOr<SplitOutcome>>> results(num_splits);
  for (const auto& [k, o] : done) results[k] = o;
  std::vector<int> todo;
  for (int k = 0; k < num_splits; ++k) {
    if (!results[k].has_value()) todo.push_back(k);
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex log_mu;
  int kept_now = 0;  // splits this run added to the state (under log_mu)
  // Eigen's thread count is process-wide; the OpenMP one is per thread and
  // is set in every worker below.
  Eigen::setNbThreads(1);
  auto worker = [&] {
    omp_set_num_threads(1);
    for (size_t i = next++; i < todo.size() && !failed; i = next++) {
      const int k = todo[i];
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<SplitOutcome> outcome = fn(k);
      const double seconds = SecondsSince(start);
      std::lock_guard<std::mutex> lock(log_mu);
      if (outcome.ok()) {
        outcome->split = k;
        outcome->seconds = seconds;
        std::string line = absl::StrFormat("[split %d] %.1f s", k, seconds);
        for (const auto& [name, value] : outcome->metrics) {
          absl::StrAppend(&line, " ", name, "=", Format(value));
        }
        std::cerr << line << std::endl;
        if (!state.path.empty()) {
          done[k] = *outcome;
          if (absl::Status saved = WriteSplitsState(state, done); !saved.ok()) {
            outcome = saved;
          } else if (state.stop_after > 0 && ++kept_now >= state.stop_after) {
            outcome = absl::AbortedError(absl::StrCat(
                "stopped after keeping ", kept_now,
                " splits (--stop-after-splits); rerun to continue"));
          }
        }
      }
      if (!outcome.ok()) {
        failed = true;
        std::cerr << "[split " << k << "] failed: " << outcome.status()
                  << std::endl;
      }
      results[k] = std::move(outcome);
    }
  };
  std::vector<std::thread> pool;
  const int workers = std::min<int>(threads, static_cast<int>(todo.size()));
  for (int t = 0; t < workers; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  std::vector<SplitOutcome> outcomes;
  for (auto& result : results) {
    // Splits never started after a failure have no result.
    if (!result.has_value()) continue;
    if (!result->ok()) return result->status();
    outcomes.push_back(std::move(**result));
  }
  if (static_cast<int>(outcomes.size()) != num_splits) {
    return absl::InternalError("a split finished without a result");
  }
  if (!state.path.empty()) BNN_RETURN_IF_ERROR(RemoveFile(state.path));
  return outcomes;
}

MetricSummary Summarize(const std::vector<double>& values) {
  MetricSummary out;
  out.per_split = values;
  double sum = 0;
  int n = 0;
  for (double v : values) {
    if (std::isnan(v)) continue;
    sum += v;
    ++n;
  }
  if (n == 0) {
    out.mean = out.se = std::nan("");
    return out;
  }
  out.mean = sum / n;
  double squares = 0;
  for (double v : values) {
    if (!std::isnan(v)) squares += (v - out.mean) * (v - out.mean);
  }
  out.se = n > 1 ? std::sqrt(squares / (n - 1) / n) : 0.0;
  return out;
}

absl::Status Report(const RunInfo& info, const CommonOptions& common,
                    const std::string& mode, const std::string& title,
                    Json config, const std::vector<SplitOutcome>& outcomes,
                    double wall_seconds) {
  // Metric names in first-seen order.
  std::vector<std::string> names;
  for (const SplitOutcome& o : outcomes) {
    for (const auto& [name, value] : o.metrics) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(name);
      }
    }
  }
  std::map<std::string, MetricSummary> summaries;
  for (const std::string& name : names) {
    std::vector<double> values;
    for (const SplitOutcome& o : outcomes) {
      double v = std::nan("");
      for (const auto& [n, value] : o.metrics) {
        if (n == name) v = value;
      }
      values.push_back(v);
    }
    summaries[name] = Summarize(values);
  }

  // Markdown on stdout.
  std::string md = absl::StrFormat(
      "## %s\n\n%d splits, %.1f s wall time, built from %s%s\n\n"
      "| metric | mean ± s.e. |\n|---|---|\n",
      title, outcomes.size(), wall_seconds, info.build_commit,
      info.build_tree_clean ? "" : " (with uncommitted changes)");
  for (const std::string& name : names) {
    const MetricSummary& s = summaries[name];
    absl::StrAppend(&md, "| ", name, " | ", Format(s.mean), " ± ", Format(s.se),
                    " |\n");
  }
  std::map<std::string, int> choices;
  for (const SplitOutcome& o : outcomes) {
    if (o.chosen.empty()) continue;
    std::vector<std::string> parts;
    for (const auto& [k, v] : o.chosen)
      parts.push_back(absl::StrCat(k, "=", v));
    ++choices[absl::StrJoin(parts, ", ")];
  }
  if (!choices.empty()) {
    absl::StrAppend(&md,
                    "\n| chosen by cross-validation | splits |\n|---|---|\n");
    for (const auto& [setting, count] : choices) {
      absl::StrAppend(&md, "| ", setting, " | ", count, " |\n");
    }
  }
  std::cout << md << std::endl;

  if (common.json_out.empty()) return absl::OkStatus();
  config["method"] = common.method;
  config["params"] = ParamsJson(common.params);
  config["activation"] = std::string(ActivationToString(common.activation));
  config["test_samples"] = common.test_samples;
  if (!common.grid.empty()) {
    Json grid = Json::object();
    for (size_t k = 0; k < common.grid.keys.size(); ++k) {
      grid[absl::StrJoin(common.grid.keys[k], "+")] = common.grid.values[k];
    }
    config["tune"] = std::move(grid);
    config["folds"] = common.folds;
  }
  Json json;
  json["tool"] = "bnn-experiment";
  json["mode"] = mode;
  json["title"] = title;
  json["build"] = info.build;
  json["git_commit"] = info.git_commit;
  json["modified_sources"] = info.modified_sources;
  json["command_line"] = info.command_line;
  json["started_at"] = info.started_at;
  json["seed"] = common.seed;
  json["threads"] = common.threads;
  json["wall_seconds"] = wall_seconds;
  json["config"] = std::move(config);
  Json metrics = Json::object();
  for (const std::string& name : names) {
    const MetricSummary& s = summaries[name];
    metrics[name] = {
        {"mean", s.mean}, {"se", s.se}, {"per_split", s.per_split}};
  }
  json["metrics"] = std::move(metrics);
  Json splits = Json::array();
  for (const SplitOutcome& o : outcomes) {
    Json entry;
    entry["split"] = o.split;
    entry["seconds"] = o.seconds;
    Json m = Json::object();
    for (const auto& [name, value] : o.metrics) m[name] = value;
    entry["metrics"] = std::move(m);
    if (!o.chosen.empty()) entry["chosen"] = ParamsJson(o.chosen);
    for (const auto& [key, value] : o.details.items()) entry[key] = value;
    splits.push_back(std::move(entry));
  }
  json["splits"] = std::move(splits);

  std::ofstream out(common.json_out);
  out << json.dump(2) << "\n";
  out.close();
  if (!out) {
    return absl::InternalError(
        absl::StrCat("could not write ", common.json_out));
  }
  return absl::OkStatus();
}

double SecondsSince(const std::chrono::steady_clock::time_point& start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace bnn::experiment
