// Fuzz target: bnn::ParseCsv, the reader behind bnnctl's --csv and the
// experiment harness.
//
// Input: one byte of options (bit 0: classification; bits 1-2: the
// delimiter; bits 3-5: the target column), then the CSV text.
//
// Invariants: a parse either fails with InvalidArgument and a message, or
// returns a dataset that passes Dataset::Validate (so consistent row widths,
// finite values and, for classification, class indices) with at least one
// row and one name per feature; and writing that dataset back as CSV (every
// field quoted, numbers in shortest round-trip form) parses to the same
// dataset.
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

#include "bnn/check.h"
#include "bnn/data/dataset.h"
#include "bnn/data/readers.h"
#include "bnn/format.h"

#include "tests/fuzz/fuzz_util.h"

namespace bnn::fuzz {
namespace {

constexpr char kDelimiters[] = {',', ';', '\t', '|'};
constexpr const char* kTargets[] = {"", "y", "0", "1", "2", "label", "", ""};

std::string Quoted(absl::string_view field) {
  return absl::StrCat("\"", absl::StrReplaceAll(field, {{"\"", "\"\""}}), "\"");
}

// `data` as CSV: features, then the target (as its original label for
// classification) last.
std::string WriteCsv(const Dataset& data, bool with_target, char delimiter) {
  std::string out;
  for (int64_t j = 0; j < data.num_features; ++j) {
    if (j > 0) out.push_back(delimiter);
    out += Quoted(data.feature_names[j]);
  }
  if (with_target) {
    out.push_back(delimiter);
    out += Quoted(data.target_name);
  }
  out.push_back('\n');
  for (int64_t i = 0; i < data.num_rows(); ++i) {
    for (int64_t j = 0; j < data.num_features; ++j) {
      if (j > 0) out.push_back(delimiter);
      out += ShortestDouble(data.row(i)[j]);
    }
    if (with_target) {
      const double y = data.targets[i];
      const double label = IsClassification(data.task)
                               ? data.class_values[static_cast<size_t>(y)]
                               : y;
      out.push_back(delimiter);
      out += ShortestDouble(label);
    }
    out += "\r\n";
  }
  return out;
}

void CheckSame(const Dataset& a, const Dataset& b) {
  BNN_CHECK(a.task == b.task);
  BNN_CHECK_EQ(a.num_features, b.num_features);
  BNN_CHECK(a.features == b.features);
  BNN_CHECK(a.targets == b.targets);
  BNN_CHECK_EQ(a.num_classes, b.num_classes);
  BNN_CHECK(a.class_values == b.class_values);
  BNN_CHECK(a.feature_names == b.feature_names);
  BNN_CHECK(a.target_name == b.target_name);
}

}  // namespace
}  // namespace bnn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  using namespace bnn;
  using namespace bnn::fuzz;
  FuzzInput input(bytes, size);
  const uint8_t flags = input.Byte();
  CsvOptions options;
  options.classification = (flags & 1) != 0;
  options.delimiter = kDelimiters[(flags >> 1) & 3];
  options.target_column = kTargets[(flags >> 3) & 7];
  const absl::StatusOr<Dataset> data = ParseCsv(input.Rest(), options);
  if (!data.ok()) {
    CheckStatus(data.status(), {absl::StatusCode::kInvalidArgument},
                "ParseCsv");
    return 0;
  }
  BNN_CHECK_OK(data->Validate());
  BNN_CHECK(data->num_rows() >= 1);
  BNN_CHECK_EQ(static_cast<int64_t>(data->feature_names.size()),
               data->num_features);
  BNN_CHECK_EQ(IsClassification(data->task), options.classification);

  // Round trip. The target is written last and named, so that a feature of
  // the same name does not take its place (the last column of a name wins);
  // an unnamed target is found by its index instead, unless a feature has
  // that index as its name.
  const bool with_target = !options.target_column.empty();
  CsvOptions again = options;
  if (with_target) {
    again.target_column = data->target_name;
    if (again.target_column.empty()) {
      again.target_column = absl::StrCat(data->num_features);
      for (const std::string& name : data->feature_names) {
        if (name == again.target_column) return 0;
      }
    }
  }
  const absl::StatusOr<Dataset> reread =
      ParseCsv(WriteCsv(*data, with_target, options.delimiter), again);
  BNN_CHECK_OK(reread.status());
  CheckSame(*data, *reread);
  return 0;
}
