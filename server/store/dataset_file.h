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

#include <absl/status/statusor.h>

#include "bnn/data/dataset.h"
#include "bnn/predict/acquisition.h"

#include "store/store.pb.h"

namespace bnn::server {

// An empty dataset with the schema `meta` describes (task, features, classes
// and names). DataLoss for an unknown task name.
absl::StatusOr<Dataset> DatasetSchema(const store::DatasetMeta& meta);

// The bytes of a version file. `rows` are the rows the version adds
// (rows [meta.first_row(), meta.num_rows()) of the version), with class
// labels encoded. ResourceExhausted if the file would reach 2 GiB (the
// protobuf limit).
absl::StatusOr<std::string> EncodeDatasetFile(const Dataset& rows,
                                              const store::DatasetMeta& meta);

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
