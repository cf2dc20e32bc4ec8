// Versioned, immutable datasets on disk. Version 1 of a dataset is its
// upload, <dir>/<dataset_id>.dataset; every append adds the next version,
// <dir>/<dataset_id>.v<N>.dataset, holding only the rows it added (see
// dataset_file.h). Metadata of every version is indexed in memory; rows are
// read from disk when needed (training, acquisition pools, appends), so
// memory does not grow with the data held.
#ifndef BNN_SERVER_STORE_DATASET_STORE_H_
#define BNN_SERVER_STORE_DATASET_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "bnn/data/dataset.h"
#include "bnn/predict/acquisition.h"

#include "store/store.pb.h"

namespace bnn::server {

// FailedPrecondition naming both versions unless `expected_version` is
// unset or the version of `latest` (optimistic concurrency of appends).
absl::Status CheckExpectedVersion(const store::DatasetMeta& latest,
                                  std::optional<int64_t> expected_version);

// Thread-safe.
class DatasetStore {
 public:
  // Opens `dir` (created if missing) and reads and verifies every version
  // file in it. A file failing verification stays indexed with its error,
  // so that requests for it report the corruption (DataLoss) instead of
  // NotFound; so do the versions after it, which build on its rows. Errors
  // are logged and the files left on disk for inspection.
  static absl::StatusOr<std::unique_ptr<DatasetStore>> Open(std::string dir);

  // Stores `data` as version 1 of a new dataset named `name` and returns its
  // metadata. `data` must pass Dataset::Validate() with class labels already
  // encoded (bnn::EncodeClassLabels).
  absl::StatusOr<store::DatasetMeta> Create(const Dataset& data,
                                            absl::string_view name);

  // Stores `rows` as the next version of `dataset_id` and returns the new
  // version's metadata (its hash covers every row of the version). `rows`
  // must have the dataset's schema (DatasetSchema of its metadata) and pass
  // Dataset::Validate(); class labels are encoded against the dataset's
  // class_values. With `expected_version`, FailedPrecondition unless that
  // is the latest version. Reads the latest version's rows (for the hash);
  // appends are serialised store-wide, so concurrent appends to a dataset
  // each get their own version.
  absl::StatusOr<store::DatasetMeta> Append(
      absl::string_view dataset_id, const Dataset& rows,
      std::optional<int64_t> expected_version);

  // The metadata of `version`, or of the latest version. NotFound for an
  // unknown id or version, DataLoss for an unreadable version.
  absl::StatusOr<store::DatasetMeta> Get(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt) const;

  // Reads the rows of a version back, verifying its files again.
  absl::StatusOr<Dataset> Load(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt) const;

  // The feature rows of a version as an acquisition pool, read from the
  // files in place (OpenDatasetRows) rather than loaded.
  absl::StatusOr<std::unique_ptr<PoolSource>> OpenRows(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt) const;

  // The latest version of every dataset whose latest version is readable,
  // oldest dataset first (by the creation of version 1, in milliseconds;
  // ties are ordered by id).
  std::vector<store::DatasetMeta> List() const;

  // Number of datasets whose latest version is readable.
  int64_t size() const;

 private:
  struct Entry {
    absl::Status status;  // why the version is unreadable, or OK
    store::DatasetMeta meta;
  };
  using Versions = std::map<int64_t, Entry>;

  explicit DatasetStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(absl::string_view dataset_id, int64_t version) const;
  // Marks every version after an unreadable or missing one unreadable too.
  void CheckVersionChain(absl::string_view dataset_id,
                         Versions* versions) const;

  const std::string dir_;
  // Held through a whole Append (version check, read, write) so that two
  // appends cannot both create the same version. Store-wide because appends
  // are rare next to lookups, which only take mu_.
  absl::Mutex append_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, Versions, std::less<>> datasets_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_DATASET_STORE_H_
