#include "client/bnnctl_output.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/strings/string_view.h>
#include <absl/strings/strip.h>
#include <absl/time/time.h>

namespace bnn::client {
namespace {

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

void WriteDatasetJson(const v1::DatasetInfo& dataset, JsonWriter* json) {
  json->BeginObject()
      .Field("dataset_id", dataset.dataset_id())
      .Field("name", dataset.name())
      .Field("task", TaskName(dataset.task()))
      .Field("num_rows", dataset.num_rows())
      .Field("num_features", dataset.num_features())
      .Field("num_classes", dataset.num_classes());
  json->Key("class_values").BeginArray();
  for (double value : dataset.class_values()) json->Number(value);
  json->EndArray();
  json->Key("feature_names").BeginArray();
  for (const std::string& name : dataset.feature_names()) json->String(name);
  json->EndArray();
  json->Field("target_name", dataset.target_name())
      .Field("version", dataset.version())
      .Field("hash", dataset.hash())
      .Field("created_unix_ms", dataset.created_unix_ms())
      .EndObject();
}

void WriteJobJson(const v1::Job& job, JsonWriter* json) {
  json->BeginObject()
      .Field("job_id", job.job_id())
      .Field("state", JobStateName(job.state()))
      .Field("dataset_id", job.dataset_id())
      .Field("method", job.method());
  // Sorted so the output does not depend on the map's iteration order.
  std::vector<std::pair<std::string, std::string>> params(job.params().begin(),
                                                          job.params().end());
  std::sort(params.begin(), params.end());
  json->Key("params").BeginObject();
  for (const auto& [key, value] : params) json->Field(key, value);
  json->EndObject();
  json->Field("progress", job.progress())
      .Field("epoch", job.epoch())
      .Field("step", job.step())
      .Field("total_steps", job.total_steps())
      .Field("last_loss", job.last_loss())
      .Field("snapshot_id", job.snapshot_id())
      .Field("error", job.error())
      .Field("created_unix_ms", job.created_unix_ms())
      .Field("started_unix_ms", job.started_unix_ms())
      .Field("finished_unix_ms", job.finished_unix_ms())
      .EndObject();
}

void WriteMethodJson(const v1::MethodInfo& method, JsonWriter* json) {
  json->BeginObject()
      .Field("name", method.name())
      .Field("description", method.description());
  json->Key("params").BeginArray();
  for (const v1::MethodParam& param : method.params()) {
    json->BeginObject()
        .Field("name", param.name())
        .Field("type", param.type())
        .Field("default", param.default_value())
        .Field("help", param.help())
        .EndObject();
  }
  json->EndArray().EndObject();
}

void WritePredictionsJson(const FeatureTable& inputs,
                          const v1::PredictResponse& response,
                          JsonWriter* json) {
  const bool classification = IsClassification(response);
  json->BeginObject()
      .Field("snapshot_id", response.snapshot_id())
      .Field("num_samples", response.num_samples())
      .Field("seed", response.seed())
      .Field("task", classification ? "classification" : "regression");
  json->Key("feature_names").BeginArray();
  for (const std::string& name : FeatureNames(inputs)) json->String(name);
  json->EndArray();
  json->Key("class_values").BeginArray();
  for (double value : response.class_values()) json->Number(value);
  json->EndArray();
  json->Key("predictions").BeginArray();
  for (int i = 0; i < response.predictions_size(); ++i) {
    const v1::RowPrediction& p = response.predictions(i);
    json->BeginObject().Key("x").BeginArray();
    if (i < inputs.num_rows()) {
      for (int64_t j = 0; j < inputs.num_features; ++j) {
        json->Number(inputs.features[i * inputs.num_features + j]);
      }
    }
    json->EndArray();
    if (classification) {
      json->Key("probabilities").BeginArray();
      for (double prob : p.probabilities()) json->Number(prob);
      json->EndArray();
      json->Field("predicted_class", p.predicted_class())
          .Field("entropy", p.entropy());
    } else {
      json->Field("mean", p.mean())
          .Field("std", Std(p.variance()))
          .Field("variance", p.variance())
          .Field("epistemic_variance", p.epistemic_variance())
          .Field("aleatoric_variance", p.aleatoric_variance());
    }
    json->EndObject();
  }
  json->EndArray().EndObject();
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
                                 absl::StrJoin(dataset.class_values(), ", ",
                                               [](std::string* out, double v) {
                                                 absl::StrAppend(out, Num(v));
                                               }),
                                 ")")});
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
  std::vector<std::pair<std::string, std::string>> params(job.params().begin(),
                                                          job.params().end());
  std::sort(params.begin(), params.end());
  std::vector<std::pair<std::string, std::string>> entries = {
      {"job", job.job_id()},
      {"state", JobStateName(job.state())},
      {"dataset", job.dataset_id()},
      {"method", job.method()},
      {"params", params.empty()
                     ? "-"
                     : absl::StrJoin(params, " ", absl::PairFormatter("="))},
      {"progress",
       absl::StrFormat("%.1f%% (step %d of %d, epoch %d)", 100 * job.progress(),
                       job.step(), job.total_steps(), job.epoch())},
      {"last loss", Num(job.last_loss())},
      {"created", Time(job.created_unix_ms())},
      {"started", Time(job.started_unix_ms())},
      {"finished", Time(job.finished_unix_ms())},
  };
  if (!job.snapshot_id().empty()) {
    entries.push_back({"snapshot", job.snapshot_id()});
  }
  if (!job.error().empty()) entries.push_back({"error", job.error()});
  return KeyValues(entries);
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

std::string FormatPredictions(const FeatureTable& inputs,
                              const v1::PredictResponse& response) {
  const bool classification = IsClassification(response);
  std::vector<std::string> header = FeatureNames(inputs);
  const size_t num_inputs = header.size();
  if (classification) {
    const int num_classes =
        std::max(response.class_values_size(),
                 response.predictions().empty()
                     ? 0
                     : response.predictions(0).probabilities_size());
    for (int k = 0; k < num_classes; ++k) {
      header.push_back(absl::StrCat("p(",
                                    k < response.class_values_size()
                                        ? Num(response.class_values(k))
                                        : absl::StrCat(k),
                                    ")"));
    }
    header.push_back("class");
  } else {
    header.push_back("mean");
    header.push_back("std");
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < response.predictions_size(); ++i) {
    const v1::RowPrediction& p = response.predictions(i);
    std::vector<std::string> row;
    for (size_t j = 0; j < num_inputs; ++j) {
      row.push_back(i < inputs.num_rows()
                        ? Num(inputs.features[i * inputs.num_features + j])
                        : "");
    }
    if (classification) {
      for (double prob : p.probabilities()) row.push_back(Num(prob));
      row.push_back(Num(p.predicted_class()));
    } else {
      row.push_back(Num(p.mean()));
      row.push_back(Num(Std(p.variance())));
    }
    rows.push_back(std::move(row));
  }
  return Table(header, rows, /*right_aligned_from=*/0);
}

}  // namespace bnn::client
