// Immutable datasets on disk, one file per dataset:
// <dir>/<dataset_id>.dataset holding a store::DatasetFile in a checksummed
// frame. Metadata of every dataset is indexed in memory; rows are read from
// disk on each Load() (training jobs only), so memory does not grow with the
// data held.
#ifndef BNN_SERVER_STORE_DATASET_STORE_H_
#define BNN_SERVER_STORE_DATASET_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "bnn/data/dataset.h"

#include "store/store.pb.h"

namespace bnn::server {

// Thread-safe.
class DatasetStore {
 public:
  // Opens `dir` (created if missing) and reads and verifies every dataset
  // file in it. A file failing verification stays indexed with its error, so
  // that requests for it report the corruption (DataLoss) instead of
  // NotFound; it is logged and left on disk for inspection.
  static absl::StatusOr<std::unique_ptr<DatasetStore>> Open(std::string dir);

  // Stores `data` as version 1 of a new dataset named `name` and returns its
  // metadata. `data` must pass Dataset::Validate() with class labels already
  // encoded (bnn::EncodeClassLabels).
  absl::StatusOr<store::DatasetMeta> Create(const Dataset& data,
                                            absl::string_view name);

  // NotFound for an unknown id, DataLoss for a corrupt file.
  absl::StatusOr<store::DatasetMeta> Get(absl::string_view dataset_id) const;

  // Reads the dataset's rows back, verifying the file again.
  absl::StatusOr<Dataset> Load(absl::string_view dataset_id) const;

  // Every readable dataset, oldest first (creation times are in
  // milliseconds; ties are ordered by id).
  std::vector<store::DatasetMeta> List() const;

  // Number of readable datasets.
  int64_t size() const;

 private:
  struct Entry {
    absl::Status status;  // why the file is unreadable, or OK
    store::DatasetMeta meta;
  };

  explicit DatasetStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(absl::string_view dataset_id) const;

  const std::string dir_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_DATASET_STORE_H_
