// Readers for the on-disk dataset layouts bnn-serve supports: CSV with a
// header, the UCI split layout of Hernandez-Lobato & Adams (2015), and IDX
// (optionally gzip'd, as shipped by dataset-fashion-mnist).
#ifndef BNN_DATA_READERS_H_
#define BNN_DATA_READERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/data/dataset.h"

namespace bnn {

struct CsvOptions {
  // Name of the target column as written in the header, or its 0-based index
  // given as a decimal string. Empty: every column is a feature and every
  // target is 0 (rows to predict on).
  std::string target_column;
  // True: labels are class labels, encoded by EncodeClassLabels. False:
  // regression.
  bool classification = false;
  // Field separator.
  char delimiter = ',';
};

// Parses CSV text: a header line, then one row per record; blank lines are
// ignored. Fields may be quoted as in RFC 4180 (a quoted field may hold the
// delimiter, line breaks and doubled quotes); lines may end in LF or CRLF.
// Errors name the 1-based line and column.
absl::StatusOr<Dataset> ParseCsv(absl::string_view text,
                                 const CsvOptions& options);
absl::StatusOr<Dataset> ReadCsv(const std::string& path,
                                const CsvOptions& options);

// A dataset in the UCI layout: data.txt (whitespace-separated numbers),
// index_features.txt, index_target.txt, index_{train,test}_K.txt, n_splits.txt
// and optionally n_hidden.txt.
struct UciDataset {
  Dataset all;  // every row, regression
  std::vector<std::vector<int64_t>> train_indices;
  std::vector<std::vector<int64_t>> test_indices;
  int n_hidden = 50;  // n_hidden.txt, or 50 when absent

  int num_splits() const { return static_cast<int>(train_indices.size()); }
  Dataset Train(int split) const { return all.Subset(train_indices[split]); }
  Dataset Test(int split) const { return all.Subset(test_indices[split]); }
};
absl::StatusOr<UciDataset> ReadUciDataset(const std::string& dir);

struct IdxOptions {
  // Pixel values are multiplied by this (1/255 maps bytes to [0, 1]).
  double scale = 1.0 / 255.0;
};
// Reads an IDX image file (ubyte, any rank >= 2: rows x prod(other dims)) and,
// if `labels_path` is non-empty, an IDX label file of the same length. Gzip'd
// and plain files are both accepted. Without labels every target is 0 and the
// task is kRegression (for unlabeled OOD sets); with labels it is a
// classification dataset.
absl::StatusOr<Dataset> ReadIdx(const std::string& images_path,
                                const std::string& labels_path,
                                const IdxOptions& options = {});
// ReadIdx of files already in memory (uncompressed): `images` and, unless
// empty, `labels`. Errors name the files "images" and "labels".
absl::StatusOr<Dataset> ParseIdx(absl::string_view images,
                                 absl::string_view labels,
                                 const IdxOptions& options = {});

}  // namespace bnn

#endif  // BNN_DATA_READERS_H_
