// CSV input of bnnctl: files or standard input ("-"), parsed by core's
// ParseCsv (RFC 4180 quoting, LF or CRLF) so malformed input fails locally
// with the same line/column messages as an upload.
#ifndef BNN_CLIENT_CSV_INPUT_H_
#define BNN_CLIENT_CSV_INPUT_H_

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "bnn/data/dataset.h"
#include "bnn/data/readers.h"

namespace bnn::client {

struct FeatureTable {
  std::vector<std::string> feature_names;
  int64_t num_features = 0;
  // Row-major num_rows x num_features.
  std::vector<double> features;
  // The target column's values, one per row, when a target column was
  // named; empty otherwise.
  std::vector<double> targets;

  int64_t num_rows() const {
    return num_features == 0
               ? 0
               : static_cast<int64_t>(features.size()) / num_features;
  }
};

// ReadCsv(path, options) (plain or gzip'd file), or, for path "-", ParseCsv
// of `standard_input` read to its end. Errors are prefixed with the path
// ("stdin" for "-").
absl::StatusOr<Dataset> ReadCsvInput(const std::string& path,
                                     const CsvOptions& options,
                                     std::istream& standard_input = std::cin);

// Parses CSV text (header line, blank lines ignored). Every column is a
// feature, except `target_column` (a header name or 0-based index) when it is
// non-empty.
absl::StatusOr<FeatureTable> ParseFeatureCsv(absl::string_view text,
                                             absl::string_view target_column);

// ParseFeatureCsv on the contents of ReadCsvInput's source.
absl::StatusOr<FeatureTable> ReadFeatureCsv(
    const std::string& path, absl::string_view target_column,
    std::istream& standard_input = std::cin);

// Checks that rows read from a CSV file, whose feature columns are
// `csv_names`, fit a stored dataset of `num_features` features named
// `dataset_names` (empty when the dataset has no names): same count and,
// where both have names, the same names in the same order. Appending rows
// with swapped columns would otherwise succeed and silently corrupt the
// dataset.
absl::Status CheckSameFeatures(const std::vector<std::string>& csv_names,
                               const std::vector<std::string>& dataset_names,
                               int64_t num_features);

}  // namespace bnn::client

#endif  // BNN_CLIENT_CSV_INPUT_H_
