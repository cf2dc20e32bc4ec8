#include "client/csv_input.h"

#include <sstream>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

namespace bnn::client {
namespace {

FeatureTable ToFeatureTable(Dataset data, bool has_target) {
  FeatureTable table;
  table.feature_names = std::move(data.feature_names);
  table.num_features = data.num_features;
  table.features = std::move(data.features);
  if (has_target) table.targets = std::move(data.targets);
  return table;
}

}  // namespace

absl::StatusOr<Dataset> ReadCsvInput(const std::string& path,
                                     const CsvOptions& options,
                                     std::istream& standard_input) {
  if (path != "-") return ReadCsv(path, options);
  std::ostringstream text;
  text << standard_input.rdbuf();
  if (standard_input.bad()) {
    return absl::DataLossError("cannot read standard input");
  }
  absl::StatusOr<Dataset> data = ParseCsv(text.str(), options);
  if (!data.ok()) {
    return absl::Status(data.status().code(),
                        absl::StrCat("stdin: ", data.status().message()));
  }
  return data;
}

absl::StatusOr<FeatureTable> ParseFeatureCsv(absl::string_view text,
                                             absl::string_view target_column) {
  CsvOptions options;
  options.target_column = std::string(target_column);
  absl::StatusOr<Dataset> data = ParseCsv(text, options);
  if (!data.ok()) return data.status();
  return ToFeatureTable(*std::move(data), !target_column.empty());
}

absl::StatusOr<FeatureTable> ReadFeatureCsv(const std::string& path,
                                            absl::string_view target_column,
                                            std::istream& standard_input) {
  CsvOptions options;
  options.target_column = std::string(target_column);
  absl::StatusOr<Dataset> data = ReadCsvInput(path, options, standard_input);
  if (!data.ok()) return data.status();
  return ToFeatureTable(*std::move(data), !target_column.empty());
}

absl::Status CheckSameFeatures(const std::vector<std::string>& csv_names,
                               const std::vector<std::string>& dataset_names,
                               int64_t num_features) {
  if (static_cast<int64_t>(csv_names.size()) != num_features) {
    return absl::InvalidArgumentError(
        absl::StrCat("the file has ", csv_names.size(),
                     " feature columns; the dataset has ", num_features));
  }
  if (dataset_names.size() != csv_names.size()) return absl::OkStatus();
  for (size_t j = 0; j < csv_names.size(); ++j) {
    if (csv_names[j] != dataset_names[j]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "feature column ", j, " is '", csv_names[j], "'; the dataset's is '",
          dataset_names[j], "' (features: ", absl::StrJoin(dataset_names, ", "),
          ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace bnn::client
