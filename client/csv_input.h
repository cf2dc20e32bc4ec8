// Feature matrices for `bnnctl predict`, read from CSV with core's parser so
// malformed input fails locally with the same line/column messages as an
// upload.
#ifndef BNN_CLIENT_CSV_INPUT_H_
#define BNN_CLIENT_CSV_INPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace bnn::client {

struct FeatureTable {
  std::vector<std::string> feature_names;
  int64_t num_features = 0;
  // Row-major num_rows x num_features.
  std::vector<double> features;

  int64_t num_rows() const {
    return num_features == 0
               ? 0
               : static_cast<int64_t>(features.size()) / num_features;
  }
};

// Parses CSV text (header line, blank lines ignored). Every column is a
// feature, except `target_column` (a header name or 0-based index) when it is
// non-empty.
absl::StatusOr<FeatureTable> ParseFeatureCsv(absl::string_view text,
                                             absl::string_view target_column);

// ParseFeatureCsv on a file's contents; errors are prefixed with the path.
absl::StatusOr<FeatureTable> ReadFeatureCsv(const std::string& path,
                                            absl::string_view target_column);

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
