// The file of one dataset version: a store::DatasetFile (its metadata and
// the rows the version added) in the checksummed record frame of
// bnn/io/record.h. Version 1 holds the upload; each later version only the
// appended rows, so an append writes nothing twice and the rows of version N
// are the rows of the files of versions 1..N in order.
#ifndef BNN_SERVER_STORE_DATASET_FILE_H_
#define BNN_SERVER_STORE_DATASET_FILE_H_

#include <memory>
#include <string>
#include <vector>

#include <absl/functional/function_ref.h>
#include <absl/status/statusor.h>
#include <absl/types/span.h>

#include "bnn/data/dataset.h"
#include "bnn/io/record.h"
#include "bnn/predict/acquisition.h"

#include "store/store.pb.h"

namespace bnn::server {

// An empty dataset with the schema `meta` describes (task, features, classes
// and names). DataLoss for an unknown task name.
absl::StatusOr<Dataset> DatasetSchema(const store::DatasetMeta& meta);

// Writes a version file as its rows arrive, so that an upload or an append
// never holds its rows in memory: every AddRows appends packed runs of
// features and targets to a bnn::RecordWriter (a valid encoding of
// store::DatasetFile: repeated fields may come in several runs), and Commit
// appends the metadata, known only then, and renames the file into place.
// Not thread-safe.
class DatasetFileWriter {
 public:
  // Rows per run are capped so that a run of features is at most about
  // this many bytes: ForEachBlock's buffers.
  static constexpr int64_t kRunBytes = int64_t{1} << 20;

  // Creates `temp_path` (a name ending in bnn::kTempSuffix).
  static absl::StatusOr<std::unique_ptr<DatasetFileWriter>> Create(
      std::string temp_path, int64_t num_features);

  // Appends rows: `features` row-major targets.size() x num_features.
  absl::Status AddRows(absl::Span<const double> features,
                       absl::Span<const double> targets);
  int64_t num_rows() const { return num_rows_; }
  int64_t num_features() const { return num_features_; }
  // Bytes written so far.
  uint64_t size_bytes() const { return record_->payload_size(); }

  // Reads the rows back in blocks of consecutive rows, in order (each at
  // most about kRunBytes of features), and calls `visit` on each with the
  // block's features and targets; with `write_back`, targets `visit`
  // changed are written back (e.g. to encode class labels).
  absl::Status ForEachBlock(
      absl::FunctionRef<absl::Status(absl::Span<const double> features,
                                     absl::Span<double> targets)>
          visit,
      bool write_back);

  // Appends `meta`, whose first_row and num_rows must span the rows
  // written, and commits the file to `path`. ResourceExhausted if the file
  // would reach 2 GiB (protobuf's limit on the payload). Call at most once.
  absl::Status Commit(const store::DatasetMeta& meta, const std::string& path);

 private:
  struct Run {
    uint64_t features_offset;  // of the run's first value in the payload
    uint64_t targets_offset;
    int64_t num_rows;
  };

  DatasetFileWriter(std::unique_ptr<RecordWriter> record, int64_t num_features)
      : record_(std::move(record)), num_features_(num_features) {}
  // Appends field `field` as one packed run of `values`; returns the
  // payload offset of the first value.
  absl::StatusOr<uint64_t> AppendPacked(int field,
                                        absl::Span<const double> values);

  std::unique_ptr<RecordWriter> record_;
  const int64_t num_features_;
  int64_t num_rows_ = 0;
  std::vector<Run> runs_;
};

struct DatasetFileContents {
  store::DatasetMeta meta;
  // The rows of this file only, with the dataset's schema.
  Dataset rows;
};

// Reads and verifies a version file. Errors name the file: DataLoss for a
// corrupt or inconsistent one (the store wrote it valid), FailedPrecondition
// for one written by a newer server, NotFound if it does not exist.
absl::StatusOr<DatasetFileContents> ReadDatasetFile(const std::string& path);

// The feature rows of the version files `paths` (versions 1..N of one
// dataset, in order) as an acquisition pool, read in place from memory
// mappings of the files: each file's checksum is verified once, then Read()
// copies only the rows asked for, so scoring a pool never holds a decoded
// copy of the dataset. `num_features` and `num_rows` are those of version N,
// checked against the files (DataLoss naming the file on a mismatch).
absl::StatusOr<std::unique_ptr<PoolSource>> OpenDatasetRows(
    const std::vector<std::string>& paths, int64_t num_features,
    int64_t num_rows);

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_DATASET_FILE_H_
