// Versioned, immutable datasets. Version 1 of a dataset is its upload; every
// append adds the next version holding only the rows it added (see
// dataset_file.h). Each version's file is a blob of the data directory's
// BlobStore (blob_store.h) and its store::DatasetMeta a record of the
// MetadataStore (metadata_store.h) naming that blob. Rows are written to a
// blob's temporary file as they arrive (NewVersionWriter) and read from the
// blobs when needed (training, acquisition pools), so memory grows neither
// with the data held nor with the data being uploaded. An append reads no
// earlier version: its hash continues from the state the latest version
// keeps. A version whose blob, or the blob of a version it builds on, is
// quarantined is DataLoss naming the dataset on every access.
#ifndef BNN_SERVER_STORE_DATASET_STORE_H_
#define BNN_SERVER_STORE_DATASET_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>

#include "bnn/data/dataset.h"
#include "bnn/data/dataset_hash.h"
#include "bnn/predict/acquisition.h"

#include "server/store/blob_store.h"
#include "server/store/dataset_file.h"
#include "server/store/metadata_store.h"
#include "store/store.pb.h"

namespace bnn::server {

// FailedPrecondition naming both versions unless `expected_version` is
// unset or the version of `latest` (optimistic concurrency of appends).
absl::Status CheckExpectedVersion(const store::DatasetMeta& latest,
                                  std::optional<int64_t> expected_version);

// FailedPrecondition naming what still depends on the dataset `dataset_id`
// (an id): the snapshots trained on it, and its QUEUED or RUNNING jobs; OK if
// nothing does. DatasetStore::Delete checks it, in its transaction, unless
// forced.
absl::Status CheckDatasetUnused(absl::string_view dataset_id,
                                MetadataReader& reader);

// Thread-safe.
class DatasetStore {
 public:
  // Both are borrowed and must outlive the store.
  DatasetStore(MetadataStore* metadata, BlobStore* blobs)
      : metadata_(metadata), blobs_(blobs) {}

  // A writer for the rows of a new version, in a temporary file of the
  // blob store, for Create or Append to commit: rows are written as they
  // arrive (an upload never holds them in memory). Dropping it uncommitted
  // deletes the file; a crash's leftover is deleted when the blob store
  // opens.
  absl::StatusOr<std::unique_ptr<DatasetFileWriter>> NewVersionWriter(
      int64_t num_features) const;

  // Stores the rows of `rows` as version 1 of a new dataset named `name`
  // (AlreadyExists if another dataset has that name) with the schema of
  // `schema` (task, feature count and names, target name, classes; its rows are
  // ignored) and returns its metadata. For classification, the targets written
  // are raw labels, each one of schema.class_values; they are encoded as class
  // indices here. Costs one read of the rows (label encoding, hash) besides the
  // write.
  absl::StatusOr<store::DatasetMeta> Create(
      std::unique_ptr<DatasetFileWriter> rows, const Dataset& schema,
      absl::string_view name);
  // The same for rows in memory: `data` must pass Dataset::Validate() with
  // class labels already encoded (bnn::EncodeClassLabels).
  absl::StatusOr<store::DatasetMeta> Create(const Dataset& data,
                                            absl::string_view name);

  // Stores `rows` (the dataset's schema, class labels encoded against its
  // class_values) as the next version of `dataset_id` and returns the new
  // version's metadata (its hash covers every row of the version). With
  // `expected_version`, FailedPrecondition unless that is the latest
  // version. Costs the appended rows only: the hash continues from the
  // state kept with the latest version (DatasetHasher). Appends are
  // serialised store-wide, so concurrent appends to a dataset each get their
  // own version.
  absl::StatusOr<store::DatasetMeta> Append(
      absl::string_view dataset_id, std::unique_ptr<DatasetFileWriter> rows,
      std::optional<int64_t> expected_version);
  // The same for rows in memory (Dataset::Validate()d).
  absl::StatusOr<store::DatasetMeta> Append(
      absl::string_view dataset_id, const Dataset& rows,
      std::optional<int64_t> expected_version);

  // AlreadyExists naming the dataset if a dataset (or an upload being
  // stored) has the name `name`.
  absl::Status CheckNameFree(absl::string_view name) const;

  // Every method that takes a `dataset_id` also takes a dataset's name
  // (names are unique): an existing id is that dataset, anything else is
  // looked up by name.

  // The id `dataset_id` (an id or a name) names.
  absl::StatusOr<std::string> ResolveId(absl::string_view dataset_id) const;

  // The metadata of `version`, or of the latest version. NotFound for an
  // unknown id or version, DataLoss for an unreadable version (its record,
  // or its blob or that of a version it builds on quarantined).
  absl::StatusOr<store::DatasetMeta> Get(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt) const;

  // Reads the rows of a version back, verifying its blobs' record frames.
  absl::StatusOr<Dataset> Load(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt) const;

  // The feature rows of a version as an acquisition pool, read from the
  // blobs in place (OpenDatasetRows) rather than loaded.
  absl::StatusOr<std::unique_ptr<PoolSource>> OpenRows(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt) const;

  // The latest version of every dataset whose latest version is readable,
  // oldest dataset first (by the creation of version 1, in milliseconds;
  // ties are ordered by id).
  std::vector<store::DatasetMeta> List() const;

  // Number of datasets.
  int64_t size() const;

  // Deletes every version of the dataset (also unreadable ones) in one
  // transaction, unless `force` is false and CheckDatasetUnused fails, then
  // the blobs no other record shares, and returns its id; later lookups are
  // NotFound. Readers that opened its blobs (an acquisition pool, a job
  // loading its rows) finish normally. Serialised with appends.
  absl::StatusOr<std::string> Delete(absl::string_view dataset_id,
                                     bool force = true);

 private:
  // Stores version 1 (Create); `encode_labels` says whether rows' targets
  // are raw labels to encode.
  absl::StatusOr<store::DatasetMeta> Commit(
      std::unique_ptr<DatasetFileWriter> rows, const Dataset& schema,
      absl::string_view name, bool encode_labels);
  // Writes `rows` with `meta` into the blob store and returns the blob; the
  // caller holds blobs_->reference_mutex() shared until its record commits.
  absl::StatusOr<std::string> StoreRows(std::unique_ptr<DatasetFileWriter> rows,
                                        const store::DatasetMeta& meta);
  // What an append continues from: the hasher and the column ranges after
  // the rows of version `meta`, resumed from the state the version keeps
  // or, for versions stored without it, by reading its rows once.
  struct RowsState {
    DatasetHasher hasher;
    ColumnRanges ranges;
  };
  absl::StatusOr<RowsState> StateAfter(const store::DatasetMeta& meta) const;
  // Versions 1..`version` (the latest if unset) of the dataset `dataset_id`
  // (an id or a name), each servable: NotFound, or DataLoss naming the
  // dataset for an unreadable record or a quarantined blob.
  absl::StatusOr<std::vector<DatasetVersionRecord>> Chain(
      absl::string_view dataset_id, std::optional<int64_t> version) const;
  // The blob paths of `chain`.
  absl::StatusOr<std::vector<std::string>> PathsOf(
      const std::vector<DatasetVersionRecord>& chain) const;

  MetadataStore* const metadata_;
  BlobStore* const blobs_;
  // Held through a whole Append (version check, read, write) so that two
  // appends cannot both create the same version. Store-wide because appends
  // are rare next to lookups, which take no lock.
  absl::Mutex append_mu_;
  mutable absl::Mutex mu_;
  // Names of uploads being committed (Create), reserved so that two
  // concurrent uploads cannot both take a name.
  std::set<std::string, std::less<>> reserved_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_DATASET_STORE_H_
