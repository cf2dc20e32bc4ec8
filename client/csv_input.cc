#include "client/csv_input.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

#include "bnn/data/readers.h"

namespace bnn::client {
namespace {

// Header of the placeholder target column added for ParseCsv, which always
// splits off a target. It is the last column, so the line and column numbers
// of number errors stay those of the user's file.
constexpr absl::string_view kPlaceholderTarget = "__bnnctl_placeholder_target";

// Adds a placeholder target column to every non-blank line, after checking
// that every row has as many fields as the header (checked here so that the
// counts in the message are the user's, not the augmented file's).
absl::StatusOr<std::string> AddPlaceholderTarget(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4 + kPlaceholderTarget.size());
  size_t header_fields = 0;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t fields =
        static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1;
    if (header_fields == 0) {
      header_fields = fields;
      absl::StrAppend(&out, line, ",", kPlaceholderTarget, "\n");
      continue;
    }
    if (fields != header_fields) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, " has ", fields,
                       " fields; the header has ", header_fields));
    }
    absl::StrAppend(&out, line, ",0\n");
  }
  return out;
}

}  // namespace

absl::StatusOr<FeatureTable> ParseFeatureCsv(absl::string_view text,
                                             absl::string_view target_column) {
  CsvOptions options;
  std::string augmented;
  if (target_column.empty()) {
    absl::StatusOr<std::string> with_target = AddPlaceholderTarget(text);
    if (!with_target.ok()) return with_target.status();
    augmented = *std::move(with_target);
    text = augmented;
    options.target_column = std::string(kPlaceholderTarget);
  } else {
    options.target_column = std::string(target_column);
  }
  absl::StatusOr<Dataset> data = ParseCsv(text, options);
  if (!data.ok()) return data.status();
  FeatureTable table;
  table.feature_names = std::move(data->feature_names);
  table.num_features = data->num_features;
  table.features = std::move(data->features);
  return table;
}

absl::StatusOr<FeatureTable> ReadFeatureCsv(const std::string& path,
                                            absl::string_view target_column) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  absl::StatusOr<FeatureTable> table =
      ParseFeatureCsv(text.str(), target_column);
  if (!table.ok()) {
    return absl::Status(table.status().code(),
                        absl::StrCat(path, ": ", table.status().message()));
  }
  return table;
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
