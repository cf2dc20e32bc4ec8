#include "client/bnnctl_output.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/strings/string_view.h>
#include <absl/strings/strip.h>
#include <absl/time/time.h>
#include <google/protobuf/map.h>
#include <google/protobuf/repeated_field.h>

namespace bnn::client {
namespace {

// [{"step", "loss"}, ...]
Json LossCurveJson(const v1::Job& job) {
  Json curve = Json::array();
  for (const v1::LossPoint& point : job.loss_curve()) {
    curve.push_back({{"step", point.step()}, {"loss", point.loss()}});
  }
  return curve;
}

std::string EnumName(absl::string_view full, absl::string_view prefix) {
  absl::ConsumePrefix(&full, prefix);
  return absl::AsciiStrToLower(full);
}

// Standard deviation from a variance; NaN (printed as null / nan) if the
// variance is not a valid one rather than silently clamping it.
double Std(double variance) {
  return variance >= 0 ? std::sqrt(variance)
                       : std::numeric_limits<double>::quiet_NaN();
}

std::string Num(double value) { return absl::StrFormat("%.6g", value); }

std::string Time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC",
                          absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

// Aligned columns separated by two spaces; numbers are right-aligned by
// `right_aligned_from` (columns with a lower index are left-aligned).
std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows,
                  size_t right_aligned_from) {
  std::vector<size_t> widths;
  auto measure = [&](const std::vector<std::string>& row) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t j = 0; j < row.size(); ++j) {
      widths[j] = std::max(widths[j], row[j].size());
    }
  };
  measure(header);
  for (const auto& row : rows) measure(row);
  std::string out;
  auto append_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t j = 0; j < row.size(); ++j) {
      if (j > 0) line += "  ";
      const int width = static_cast<int>(widths[j]);
      line += j >= right_aligned_from ? absl::StrFormat("%*s", width, row[j])
                                      : absl::StrFormat("%-*s", width, row[j]);
    }
    // Left-aligned last columns would leave trailing blanks.
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  };
  append_row(header);
  for (const auto& row : rows) append_row(row);
  return out;
}

// "key  value" lines with the keys padded to one width.
std::string KeyValues(
    const std::vector<std::pair<std::string, std::string>>& entries) {
  size_t width = 0;
  for (const auto& [key, value] : entries) width = std::max(width, key.size());
  std::string out;
  for (const auto& [key, value] : entries) {
    absl::StrAppend(&out,
                    absl::StrFormat("%-*s  ", static_cast<int>(width), key),
                    value, "\n");
  }
  return out;
}

// Sorted so the output does not depend on the map's iteration order.
std::vector<std::pair<std::string, std::string>> SortedParams(
    const google::protobuf::Map<std::string, std::string>& params) {
  std::vector<std::pair<std::string, std::string>> sorted(params.begin(),
                                                          params.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

std::string ParamsText(
    const google::protobuf::Map<std::string, std::string>& params) {
  return params.empty() ? "-"
                        : absl::StrJoin(SortedParams(params), " ",
                                        absl::PairFormatter("="));
}

Json ParamsJson(const google::protobuf::Map<std::string, std::string>& params) {
  Json json = Json::object();
  for (auto& [key, value] : SortedParams(params)) json[key] = std::move(value);
  return json;
}

// A JSON array of `values` (a repeated field or a vector).
template <typename Values>
Json Array(const Values& values) {
  Json json = Json::array();
  for (const auto& value : values) json.push_back(value);
  return json;
}

// The features of row i of `table` (empty outside the table).
Json RowFeaturesJson(const FeatureTable& table, int64_t i) {
  Json json = Json::array();
  if (i >= 0 && i < table.num_rows()) {
    for (int64_t j = 0; j < table.num_features; ++j) {
      json.push_back(table.features[i * table.num_features + j]);
    }
  }
  return json;
}

// Row i's features as table cells ("" outside the table).
std::vector<std::string> RowFeatureCells(const FeatureTable& table, int64_t i) {
  std::vector<std::string> cells;
  for (int64_t j = 0; j < table.num_features; ++j) {
    cells.push_back(i >= 0 && i < table.num_rows()
                        ? Num(table.features[i * table.num_features + j])
                        : "");
  }
  return cells;
}

std::string Labels(const google::protobuf::RepeatedField<double>& values) {
  return absl::StrJoin(values, ", ", [](std::string* out, double v) {
    absl::StrAppend(out, Num(v));
  });
}

// "p(LABEL)" per class: the label values when known, else class indices.
std::vector<std::string> ClassColumns(const v1::PredictResponse& response) {
  const int num_classes =
      std::max(response.class_values_size(),
               response.predictions().empty()
                   ? 0
                   : response.predictions(0).probabilities_size());
  std::vector<std::string> columns;
  for (int k = 0; k < num_classes; ++k) {
    columns.push_back(absl::StrCat("p(",
                                   k < response.class_values_size()
                                       ? Num(response.class_values(k))
                                       : absl::StrCat(k),
                                   ")"));
  }
  return columns;
}

// The per-sample outputs as a long table: one line per (row, sample) with
// the sample's mean (regression) or class probabilities (classification).
std::string FormatSampleOutputs(const v1::PredictResponse& response,
                                bool classification) {
  std::vector<std::string> header = {"row", "sample"};
  if (classification) {
    for (std::string& column : ClassColumns(response)) {
      header.push_back(std::move(column));
    }
  } else {
    header.push_back("mean");
  }
  // Values per sample: 1, or C sample-major probabilities.
  const int width = std::max(1, static_cast<int>(header.size()) - 2);
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < response.predictions_size(); ++i) {
    const auto& outputs = response.predictions(i).sample_outputs();
    for (int begin = 0; begin < outputs.size(); begin += width) {
      std::vector<std::string> row = {absl::StrCat(i),
                                      absl::StrCat(begin / width)};
      for (int c = begin; c < std::min(begin + width, outputs.size()); ++c) {
        row.push_back(Num(outputs[c]));
      }
      rows.push_back(std::move(row));
    }
  }
  return Table(header, rows, /*right_aligned_from=*/0);
}

std::string ModelText(const v1::ModelSpec& model) {
  if (model.hidden_sizes().empty()) return "no hidden layer";
  std::string text = absl::StrJoin(model.hidden_sizes(), "-");
  if (!model.activations().empty()) {
    absl::StrAppend(&text, " ", absl::StrJoin(model.activations(), ","));
  }
  return text;
}

std::vector<std::string> FeatureNames(const FeatureTable& inputs) {
  std::vector<std::string> names = inputs.feature_names;
  if (names.size() != static_cast<size_t>(inputs.num_features)) {
    names.clear();
    for (int64_t j = 0; j < inputs.num_features; ++j) {
      names.push_back(absl::StrCat("x", j));
    }
  }
  return names;
}

}  // namespace

std::string TaskName(v1::Task task) {
  return EnumName(v1::Task_Name(task), "TASK_");
}

std::string JobStateName(v1::JobState state) {
  return EnumName(v1::JobState_Name(state), "JOB_STATE_");
}

bool IsClassification(const v1::PredictResponse& response) {
  return !response.class_values().empty() ||
         (!response.predictions().empty() &&
          !response.predictions(0).probabilities().empty());
}

std::string JsonText(const Json& value) {
  return value.dump(/*indent=*/-1, /*indent_char=*/' ', /*ensure_ascii=*/false,
                    Json::error_handler_t::replace);
}

Json DatasetJson(const v1::DatasetInfo& dataset) {
  return {{"dataset_id", dataset.dataset_id()},
          {"name", dataset.name()},
          {"task", TaskName(dataset.task())},
          {"num_rows", dataset.num_rows()},
          {"num_features", dataset.num_features()},
          {"num_classes", dataset.num_classes()},
          {"class_values", Array(dataset.class_values())},
          {"feature_names", Array(dataset.feature_names())},
          {"target_name", dataset.target_name()},
          {"version", dataset.version()},
          {"hash", dataset.hash()},
          {"created_unix_ms", dataset.created_unix_ms()}};
}

Json JobJson(const v1::Job& job) {
  return {{"job_id", job.job_id()},
          {"state", JobStateName(job.state())},
          {"dataset_id", job.dataset_id()},
          {"method", job.method()},
          {"params", ParamsJson(job.params())},
          {"progress", job.progress()},
          {"epoch", job.epoch()},
          {"step", job.step()},
          {"total_steps", job.total_steps()},
          {"last_loss", job.last_loss()},
          {"snapshot_id", job.snapshot_id()},
          {"error", job.error()},
          {"created_unix_ms", job.created_unix_ms()},
          {"started_unix_ms", job.started_unix_ms()},
          {"finished_unix_ms", job.finished_unix_ms()},
          {"model_name", job.model_name()},
          {"publish", job.publish()},
          {"loss_curve", LossCurveJson(job)}};
}

Json JobEventJson(const v1::JobEvent& event) {
  return {{"kind", EnumName(v1::JobEvent::Kind_Name(event.kind()), "KIND_")},
          {"state", JobStateName(event.state())},
          {"epoch", event.epoch()},
          {"step", event.step()},
          {"total_steps", event.total_steps()},
          {"loss", event.loss()},
          {"steps_per_second", event.steps_per_second()},
          {"eta_seconds", event.eta_seconds()},
          {"unix_ms", event.unix_ms()},
          {"error", event.error()},
          {"snapshot_id", event.snapshot_id()}};
}

Json MethodJson(const v1::MethodInfo& method) {
  Json params = Json::array();
  for (const v1::MethodParam& param : method.params()) {
    params.push_back({{"name", param.name()},
                      {"type", param.type()},
                      {"default", param.default_value()},
                      {"help", param.help()}});
  }
  return {{"name", method.name()},
          {"description", method.description()},
          {"params", std::move(params)}};
}

Json SnapshotJson(const v1::SnapshotInfo& snapshot) {
  return {{"snapshot_id", snapshot.snapshot_id()},
          {"method", snapshot.method()},
          {"params", ParamsJson(snapshot.params())},
          {"dataset_id", snapshot.dataset_id()},
          {"dataset_version", snapshot.dataset_version()},
          {"dataset_hash", snapshot.dataset_hash()},
          {"task", TaskName(snapshot.task())},
          {"model",
           {{"hidden_sizes", Array(snapshot.model().hidden_sizes())},
            {"activations", Array(snapshot.model().activations())}}},
          {"num_features", snapshot.num_features()},
          {"num_parameters", snapshot.num_parameters()},
          {"posterior_family", snapshot.posterior_family()},
          {"steps", snapshot.steps()},
          {"epochs", snapshot.epochs()},
          {"final_loss", snapshot.final_loss()},
          {"train_seconds", snapshot.train_seconds()},
          {"seed", snapshot.seed()},
          {"created_unix_ms", snapshot.created_unix_ms()},
          {"size_bytes", snapshot.size_bytes()},
          {"format_version", snapshot.format_version()},
          {"library_version", snapshot.library_version()},
          {"parent_snapshot_id", snapshot.parent_snapshot_id()},
          {"prior_from_parent", snapshot.prior_from_parent()},
          {"class_values", Array(snapshot.class_values())},
          {"job_id", snapshot.job_id()}};
}

Json PredictionsJson(const FeatureTable& inputs,
                     const v1::PredictRequest& request,
                     const v1::PredictResponse& response) {
  const bool classification = IsClassification(response);
  Json predictions = Json::array();
  for (int i = 0; i < response.predictions_size(); ++i) {
    const v1::RowPrediction& p = response.predictions(i);
    Json row = {{"x", RowFeaturesJson(inputs, i)}};
    if (classification) {
      row["probabilities"] = Array(p.probabilities());
      row["predicted_class"] = p.predicted_class();
      row["entropy"] = p.entropy();
      row["expected_entropy"] = p.expected_entropy();
      row["mutual_information"] = p.mutual_information();
      row["variation_ratio"] = p.variation_ratio();
    } else {
      row["mean"] = p.mean();
      row["std"] = Std(p.variance());
      row["variance"] = p.variance();
      row["epistemic_variance"] = p.epistemic_variance();
      row["aleatoric_variance"] = p.aleatoric_variance();
      row["quantiles"] = Array(p.quantiles());
    }
    if (request.per_sample()) {
      row["sample_outputs"] = Array(p.sample_outputs());
    }
    predictions.push_back(std::move(row));
  }
  Json out = {{"snapshot_id", response.snapshot_id()}};
  if (!response.model_name().empty()) {
    out["model_name"] = response.model_name();
    out["model_version"] = response.model_version();
  }
  out["num_samples"] = response.num_samples();
  out["seed"] = response.seed();
  out["linearized"] = request.linearized();
  out["task"] = classification ? "classification" : "regression";
  out["feature_names"] = Array(FeatureNames(inputs));
  out["class_values"] = Array(response.class_values());
  out["quantile_levels"] = Array(request.quantiles());
  out["predictions"] = std::move(predictions);
  return out;
}

Json AcquisitionJson(const v1::AcquireRequest& request,
                     const v1::AcquireResponse& response,
                     const FeatureTable* pool) {
  Json acquired = Json::array();
  for (int i = 0; i < response.indices_size(); ++i) {
    Json entry = {{"index", response.indices(i)},
                  {"score", i < response.scores_size()
                                ? response.scores(i)
                                : std::numeric_limits<double>::quiet_NaN()}};
    if (pool != nullptr) {
      entry["x"] = RowFeaturesJson(*pool, response.indices(i));
    }
    acquired.push_back(std::move(entry));
  }
  Json out = {{"snapshot_id", response.snapshot_id().empty()
                                  ? request.snapshot_id()
                                  : response.snapshot_id()}};
  if (!response.model_name().empty()) {
    out["model_name"] = response.model_name();
    out["model_version"] = response.model_version();
  }
  out["heuristic"] = request.heuristic();
  out["pool_rows"] = response.pool_rows();
  out["seed"] = response.seed();
  out["acquired"] = std::move(acquired);
  return out;
}

Json ModelVersionJson(const v1::ModelVersion& version) {
  return {{"model_name", version.model_name()},
          {"version", version.version()},
          {"snapshot_id", version.snapshot_id()},
          {"created_unix_ms", version.created_unix_ms()},
          {"aliases", Array(version.aliases())}};
}

Json ModelJson(const v1::ModelInfo& model) {
  // Sorted by alias, whatever the map's order.
  const std::map<std::string, int64_t> sorted(model.aliases().begin(),
                                              model.aliases().end());
  Json aliases = Json::object();
  for (const auto& [alias, version] : sorted) aliases[alias] = version;
  Json versions = Json::array();
  for (const v1::ModelVersion& version : model.versions()) {
    versions.push_back(ModelVersionJson(version));
  }
  return {{"name", model.name()},
          {"num_versions", model.num_versions()},
          {"latest_version", model.latest_version()},
          {"aliases", std::move(aliases)},
          {"created_unix_ms", model.created_unix_ms()},
          {"updated_unix_ms", model.updated_unix_ms()},
          {"versions", std::move(versions)}};
}

std::string FormatDataset(const v1::DatasetInfo& dataset) {
  std::vector<std::pair<std::string, std::string>> entries = {
      {"dataset", dataset.dataset_id()},
      {"name", dataset.name()},
      {"task", TaskName(dataset.task())},
      {"rows", absl::StrCat(dataset.num_rows())},
      {"features", absl::StrCat(dataset.num_features())},
  };
  if (!dataset.feature_names().empty()) {
    entries.back().second +=
        absl::StrCat(" (", absl::StrJoin(dataset.feature_names(), ", "), ")");
  }
  if (!dataset.target_name().empty()) {
    entries.push_back({"target", dataset.target_name()});
  }
  if (dataset.num_classes() > 0) {
    entries.push_back(
        {"classes", absl::StrCat(dataset.num_classes(), " (labels ",
                                 Labels(dataset.class_values()), ")")});
  }
  entries.push_back({"version", absl::StrCat(dataset.version())});
  entries.push_back({"hash", dataset.hash()});
  entries.push_back({"created", Time(dataset.created_unix_ms())});
  return KeyValues(entries);
}

std::string FormatDatasetList(const std::vector<v1::DatasetInfo>& datasets) {
  if (datasets.empty()) return "no datasets\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::DatasetInfo& d : datasets) {
    rows.push_back({d.dataset_id(), d.name(), TaskName(d.task()),
                    absl::StrCat(d.num_rows()), absl::StrCat(d.num_features()),
                    Time(d.created_unix_ms())});
  }
  return Table({"ID", "NAME", "TASK", "ROWS", "FEATURES", "CREATED"}, rows,
               /*right_aligned_from=*/6);
}

std::string FormatJob(const v1::Job& job) {
  std::vector<std::pair<std::string, std::string>> entries = {
      {"job", job.job_id()},
      {"state", JobStateName(job.state())},
      {"dataset", job.dataset_id()},
      {"method", job.method()},
      {"params", ParamsText(job.params())},
      {"progress",
       absl::StrFormat("%.1f%% (step %d of %d, epoch %d)", 100 * job.progress(),
                       job.step(), job.total_steps(), job.epoch())},
      {"last loss", Num(job.last_loss())},
      {"created", Time(job.created_unix_ms())},
      {"started", Time(job.started_unix_ms())},
      {"finished", Time(job.finished_unix_ms())},
  };
  if (!job.model_name().empty()) {
    entries.push_back(
        {"model",
         absl::StrCat(job.model_name(), job.publish() ? " (publish)" : "")});
  }
  if (job.loss_curve_size() > 0) {
    entries.push_back(
        {"loss curve", absl::StrCat(job.loss_curve_size(), " points")});
  }
  if (!job.snapshot_id().empty()) {
    entries.push_back({"snapshot", job.snapshot_id()});
  }
  if (!job.error().empty()) entries.push_back({"error", job.error()});
  return KeyValues(entries);
}

std::string FormatJobList(const std::vector<v1::Job>& jobs) {
  if (jobs.empty()) return "no jobs\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::Job& job : jobs) {
    rows.push_back({job.job_id(), JobStateName(job.state()), job.method(),
                    job.dataset_id(),
                    job.model_name().empty() ? "-" : job.model_name(),
                    absl::StrFormat("%.1f%%", 100 * job.progress()),
                    job.step() > 0 ? Num(job.last_loss()) : "-",
                    Time(job.created_unix_ms())});
  }
  return Table({"ID", "STATE", "METHOD", "DATASET", "MODEL", "PROGRESS", "LOSS",
                "CREATED"},
               rows, /*right_aligned_from=*/5);
}

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const int64_t total = static_cast<int64_t>(std::llround(seconds));
  if (total >= 3600) {
    return absl::StrFormat("%d:%02d:%02d", total / 3600, total / 60 % 60,
                           total % 60);
  }
  return absl::StrFormat("%d:%02d", total / 60, total % 60);
}

std::string FormatJobEventLine(const v1::JobEvent& event) {
  std::string line = JobStateName(event.state());
  if (event.total_steps() > 0) {
    absl::StrAppend(
        &line, absl::StrFormat(" step %d/%d (%.1f%%) epoch %d", event.step(),
                               event.total_steps(),
                               100.0 * event.step() / event.total_steps(),
                               event.epoch()));
  }
  if (event.step() > 0) absl::StrAppend(&line, " loss ", Num(event.loss()));
  if (event.steps_per_second() > 0) {
    absl::StrAppend(
        &line, absl::StrFormat(" %.1f steps/s eta %s", event.steps_per_second(),
                               FormatDuration(event.eta_seconds())));
  }
  if (!event.snapshot_id().empty()) {
    absl::StrAppend(&line, " snapshot ", event.snapshot_id());
  }
  if (!event.error().empty()) absl::StrAppend(&line, " error: ", event.error());
  return line;
}

std::string FormatProgressBar(const v1::JobEvent& event, int width) {
  const double fraction =
      event.total_steps() > 0
          ? std::clamp(static_cast<double>(event.step()) / event.total_steps(),
                       0.0, 1.0)
          : 0.0;
  const int filled = static_cast<int>(fraction * width);
  std::string bar = absl::StrCat("[", std::string(filled, '#'),
                                 std::string(width - filled, '.'), "]");
  absl::StrAppend(&bar, absl::StrFormat(" %5.1f%%  step %d/%d", 100 * fraction,
                                        event.step(), event.total_steps()));
  if (event.step() > 0) absl::StrAppend(&bar, "  loss ", Num(event.loss()));
  if (event.steps_per_second() > 0) {
    absl::StrAppend(&bar, absl::StrFormat("  %.1f steps/s  ETA %s",
                                          event.steps_per_second(),
                                          FormatDuration(event.eta_seconds())));
  }
  absl::StrAppend(&bar, "  ", JobStateName(event.state()));
  return bar;
}

std::string FormatMethods(const std::vector<v1::MethodInfo>& methods) {
  std::string out;
  for (const v1::MethodInfo& method : methods) {
    if (!out.empty()) out += "\n";
    absl::StrAppend(&out, method.name(), ": ", method.description(), "\n");
    std::vector<std::vector<std::string>> rows;
    for (const v1::MethodParam& p : method.params()) {
      rows.push_back({absl::StrCat("  ", p.name()), p.type(), p.default_value(),
                      p.help()});
    }
    if (!rows.empty()) {
      out += Table({"  PARAM", "TYPE", "DEFAULT", "HELP"}, rows,
                   /*right_aligned_from=*/4);
    }
  }
  return out.empty() ? "no methods\n" : out;
}

std::string FormatSnapshot(const v1::SnapshotInfo& snapshot) {
  std::vector<std::pair<std::string, std::string>> entries = {
      {"snapshot", snapshot.snapshot_id()},
      {"method", snapshot.method()},
      {"params", ParamsText(snapshot.params())},
      {"dataset", absl::StrCat(snapshot.dataset_id(), " version ",
                               snapshot.dataset_version())},
      {"task", TaskName(snapshot.task())},
      {"model", ModelText(snapshot.model())},
      {"features", absl::StrCat(snapshot.num_features())},
      {"parameters", absl::StrCat(snapshot.num_parameters())},
      {"posterior", snapshot.posterior_family()},
  };
  if (!snapshot.class_values().empty()) {
    entries.push_back({"classes", Labels(snapshot.class_values())});
  }
  if (!snapshot.parent_snapshot_id().empty()) {
    entries.push_back(
        {"parent", absl::StrCat(snapshot.parent_snapshot_id(),
                                snapshot.prior_from_parent()
                                    ? " (its posterior is the prior)"
                                    : " (warm start)")});
  }
  entries.push_back(
      {"training",
       absl::StrFormat("%d steps, %d epochs, %.3g s, final loss "
                       "%s, seed %d",
                       snapshot.steps(), snapshot.epochs(),
                       snapshot.train_seconds(), Num(snapshot.final_loss()),
                       snapshot.seed())});
  entries.push_back(
      {"format", absl::StrCat("version ", snapshot.format_version(),
                              ", library ", snapshot.library_version(), ", ",
                              snapshot.size_bytes(), " bytes")});
  if (!snapshot.job_id().empty()) {
    entries.push_back({"job", snapshot.job_id()});
  }
  entries.push_back({"created", Time(snapshot.created_unix_ms())});
  return KeyValues(entries);
}

std::string FormatSnapshotList(const std::vector<v1::SnapshotInfo>& snapshots) {
  if (snapshots.empty()) return "no snapshots\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::SnapshotInfo& s : snapshots) {
    rows.push_back(
        {s.snapshot_id(), s.method(), s.dataset_id(),
         absl::StrCat(s.dataset_version()), s.posterior_family(),
         s.parent_snapshot_id().empty() ? "-" : s.parent_snapshot_id(),
         Time(s.created_unix_ms())});
  }
  return Table(
      {"ID", "METHOD", "DATASET", "VERSION", "FAMILY", "PARENT", "CREATED"},
      rows, /*right_aligned_from=*/7);
}

std::string FormatPredictions(const FeatureTable& inputs,
                              const v1::PredictRequest& request,
                              const v1::PredictResponse& response) {
  const bool classification = IsClassification(response);
  std::vector<std::string> header = FeatureNames(inputs);
  if (classification) {
    for (std::string& column : ClassColumns(response)) {
      header.push_back(std::move(column));
    }
    header.insert(header.end(), {"class", "entropy", "mutual_info"});
  } else {
    header.insert(header.end(), {"mean", "std"});
    for (double level : request.quantiles()) {
      header.push_back(absl::StrCat("q", Num(level)));
    }
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < response.predictions_size(); ++i) {
    const v1::RowPrediction& p = response.predictions(i);
    std::vector<std::string> row = RowFeatureCells(inputs, i);
    if (classification) {
      for (double prob : p.probabilities()) row.push_back(Num(prob));
      row.push_back(Num(p.predicted_class()));
      row.push_back(Num(p.entropy()));
      row.push_back(Num(p.mutual_information()));
    } else {
      row.push_back(Num(p.mean()));
      row.push_back(Num(Std(p.variance())));
      for (double value : p.quantiles()) row.push_back(Num(value));
    }
    rows.push_back(std::move(row));
  }
  std::string out = Table(header, rows, /*right_aligned_from=*/0);
  if (!response.model_name().empty()) {
    absl::StrAppend(&out, "answered by snapshot ", response.snapshot_id(),
                    " (model ", response.model_name(), " version ",
                    response.model_version(), ")\n");
  }
  if (request.per_sample()) {
    absl::StrAppend(&out, "\nper-sample outputs (", response.num_samples(),
                    " samples per row):\n",
                    FormatSampleOutputs(response, classification));
  }
  return out;
}

namespace {

// "latest=2, stable=1", sorted by alias; "-" without aliases.
std::string AliasesText(const v1::ModelInfo& model) {
  const std::map<std::string, int64_t> sorted(model.aliases().begin(),
                                              model.aliases().end());
  std::vector<std::string> parts;
  for (const auto& [alias, version] : sorted) {
    parts.push_back(absl::StrCat(alias, "=", version));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

}  // namespace

std::string FormatModel(const v1::ModelInfo& model) {
  std::string out = KeyValues({
      {"model", model.name()},
      {"versions", absl::StrCat(model.num_versions())},
      {"aliases", AliasesText(model)},
      {"created", Time(model.created_unix_ms())},
      {"updated", Time(model.updated_unix_ms())},
  });
  if (model.versions().empty()) return out;
  std::vector<std::vector<std::string>> rows;
  for (const v1::ModelVersion& v : model.versions()) {
    rows.push_back({absl::StrCat(v.version()), v.snapshot_id(),
                    v.aliases().empty() ? "-" : absl::StrJoin(v.aliases(), ","),
                    Time(v.created_unix_ms())});
  }
  absl::StrAppend(&out, "\n",
                  Table({"VERSION", "SNAPSHOT", "ALIASES", "CREATED"}, rows,
                        /*right_aligned_from=*/4));
  return out;
}

std::string FormatModelList(const std::vector<v1::ModelInfo>& models) {
  if (models.empty()) return "no models\n";
  std::vector<std::vector<std::string>> rows;
  for (const v1::ModelInfo& m : models) {
    rows.push_back({m.name(), absl::StrCat(m.num_versions()), AliasesText(m),
                    Time(m.updated_unix_ms())});
  }
  return Table({"NAME", "VERSIONS", "ALIASES", "UPDATED"}, rows,
               /*right_aligned_from=*/4);
}

std::string FormatModelVersion(const v1::ModelVersion& version) {
  return absl::StrCat("published snapshot ", version.snapshot_id(),
                      " as model ", version.model_name(), " version ",
                      version.version(), " (aliases ",
                      absl::StrJoin(version.aliases(), ", "), ")\n");
}

Json EvaluationJson(const v1::EvaluateResponse& response) {
  Json out = {{"snapshot_id", response.snapshot_id()}};
  if (!response.model_name().empty()) {
    out["model_name"] = response.model_name();
    out["model_version"] = response.model_version();
  }
  out["task"] = response.task() == v1::TASK_CLASSIFICATION ? "classification"
                                                           : "regression";
  out["num_rows"] = response.num_rows();
  out["num_samples"] = response.num_samples();
  out["seed"] = response.seed();
  if (response.has_rmse()) out["rmse"] = response.rmse();
  if (response.has_log_likelihood()) {
    out["log_likelihood"] = response.log_likelihood();
  }
  if (response.has_nll()) out["nll"] = response.nll();
  if (response.has_accuracy()) out["accuracy"] = response.accuracy();
  if (response.has_brier()) out["brier"] = response.brier();
  if (response.has_ece()) out["ece"] = response.ece();
  if (response.reliability_size() > 0) {
    Json bins = Json::array();
    for (const v1::ReliabilityBin& bin : response.reliability()) {
      bins.push_back({{"lower", bin.lower()},
                      {"upper", bin.upper()},
                      {"count", bin.count()},
                      {"mean_confidence", bin.mean_confidence()},
                      {"accuracy", bin.accuracy()}});
    }
    out["reliability"] = std::move(bins);
  }
  if (response.has_auroc_entropy()) {
    out["auroc_entropy"] = response.auroc_entropy();
    out["auroc_mutual_information"] = response.auroc_mutual_information();
    out["ood_rows"] = response.ood_rows();
  }
  return out;
}

std::string FormatEvaluation(const v1::EvaluateResponse& response) {
  std::vector<std::vector<std::string>> lines;
  const auto add = [&](const char* name, bool has, double value) {
    if (has) lines.push_back({name, Num(value)});
  };
  add("rmse", response.has_rmse(), response.rmse());
  add("log_likelihood", response.has_log_likelihood(),
      response.log_likelihood());
  add("nll", response.has_nll(), response.nll());
  add("accuracy", response.has_accuracy(), response.accuracy());
  add("brier", response.has_brier(), response.brier());
  add("ece", response.has_ece(), response.ece());
  add("auroc_entropy", response.has_auroc_entropy(), response.auroc_entropy());
  add("auroc_mutual_information", response.has_auroc_mutual_information(),
      response.auroc_mutual_information());
  std::string out = Table({"metric", "value"}, lines, /*right_aligned_from=*/1);
  absl::StrAppend(&out, response.num_rows(), " rows",
                  response.ood_rows() > 0
                      ? absl::StrCat(", ", response.ood_rows(), " OOD rows")
                      : std::string(),
                  ", ", response.num_samples(), " samples, seed ",
                  response.seed(), "\n");
  if (response.reliability_size() > 0) {
    std::vector<std::vector<std::string>> bins;
    for (const v1::ReliabilityBin& bin : response.reliability()) {
      bins.push_back(
          {absl::StrCat("(", Num(bin.lower()), ", ", Num(bin.upper()), "]"),
           absl::StrCat(bin.count()), Num(bin.mean_confidence()),
           Num(bin.accuracy())});
    }
    absl::StrAppend(&out, "reliability diagram:\n",
                    Table({"bin", "count", "confidence", "accuracy"}, bins,
                          /*right_aligned_from=*/1));
  }
  return out;
}

std::string FormatAcquisition(const v1::AcquireResponse& response,
                              const FeatureTable* pool) {
  std::vector<std::string> header = {"rank", "index", "score"};
  if (pool != nullptr) {
    for (std::string& name : FeatureNames(*pool)) {
      header.push_back(std::move(name));
    }
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < response.indices_size(); ++i) {
    std::vector<std::string> row = {
        absl::StrCat(i + 1), absl::StrCat(response.indices(i)),
        i < response.scores_size() ? Num(response.scores(i)) : ""};
    if (pool != nullptr) {
      for (std::string& cell : RowFeatureCells(*pool, response.indices(i))) {
        row.push_back(std::move(cell));
      }
    }
    rows.push_back(std::move(row));
  }
  std::string out =
      absl::StrCat(Table(header, rows, /*right_aligned_from=*/0), "pool rows ",
                   response.pool_rows(), ", seed ", response.seed(), "\n");
  if (!response.model_name().empty()) {
    absl::StrAppend(&out, "scored by snapshot ", response.snapshot_id(),
                    " (model ", response.model_name(), " version ",
                    response.model_version(), ")\n");
  }
  return out;
}

InheritedParams InheritParentParams(
    const v1::SnapshotInfo& parent, const std::string& method,
    const std::map<std::string, std::string>& given) {
  InheritedParams out;
  out.same_method = parent.method() == method;
  out.params = given;
  if (!out.same_method) return out;
  // Sorted by name, so that the printed line does not depend on the
  // protobuf map's order.
  const std::map<std::string, std::string> own(parent.params().begin(),
                                               parent.params().end());
  for (const auto& [name, value] : own) {
    auto it = given.find(name);
    if (it == given.end()) {
      out.params[name] = value;
      out.kept.push_back(absl::StrCat(name, "=", value));
    } else if (it->second != value) {
      out.changed.push_back(absl::StrCat(name, " ", value, " -> ", it->second));
    }
  }
  for (const auto& [name, value] : given) {
    if (own.count(name) == 0) {
      out.changed.push_back(absl::StrCat(name, " ", value, " (new)"));
    }
  }
  return out;
}

std::string FormatInheritedParams(const v1::SnapshotInfo& parent,
                                  const std::string& method,
                                  const InheritedParams& inherited) {
  if (!inherited.same_method) {
    return absl::StrCat("parent ", parent.snapshot_id(), " was trained with ",
                        parent.method(), ", not ", method,
                        ": its parameters are not carried over (the "
                        "method's defaults and --param apply)");
  }
  return absl::StrCat(
      "parameters from parent ", parent.snapshot_id(), ": kept ",
      inherited.kept.empty() ? "none" : absl::StrJoin(inherited.kept, ", "),
      "; changed ",
      inherited.changed.empty() ? "none"
                                : absl::StrJoin(inherited.changed, ", "));
}

}  // namespace bnn::client
