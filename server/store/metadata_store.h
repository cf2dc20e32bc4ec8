// The metadata store: datasets and their versions, snapshots, training jobs
// (each with its bounded loss curve inside its record), named models with
// versions and aliases, behind one interface with two backends: SQLite, a
// file in the data directory (sqlite_metadata_store.h, the default), and
// PostgreSQL, shared by replicas (postgres_metadata_store.h). Both run the
// same SQL operations (sql_metadata_ops.h); nothing here is specific to a
// backend.
//
// Records are the protobuf messages of store.proto and metadata.proto. A
// backend keeps each record whole as an opaque payload (EncodePayload: the
// serialised message in the checksummed record frame of bnn/io/record.h) and
// copies the fields that lookups, filters, ordering and uniqueness need into
// indexed columns, so that a new proto field needs no schema change. A
// payload that fails its checksum or does not parse, or disagrees with its
// row's key, is DataLoss naming the record.
//
// Every operation runs inside a transaction: Read() gives a consistent view,
// Write() applies all of a body's changes or none (e.g. "mark the job
// SUCCEEDED, add its snapshot, publish it as a model version and move
// `latest`"). Errors: NotFound, AlreadyExists naming the id or name taken,
// FailedPrecondition for a change the current state forbids (naming what
// forbids it), InvalidArgument for a bad filter or page token, DataLoss for
// a corrupt record.
#ifndef BNN_SERVER_STORE_METADATA_STORE_H_
#define BNN_SERVER_STORE_METADATA_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_set.h>
#include <absl/functional/function_ref.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/types/span.h>

#include "server/store/job_filter.h"
#include "store/metadata.pb.h"
#include "store/store.pb.h"

namespace bnn::server {

// Paging of a list: newest first. `page_token` is empty for the first page,
// else the next_page_token of the previous page of the same list.
struct PageRequest {
  // Items per page, 1..kMaxPageSize.
  int page_size = 50;
  std::string page_token;
};
inline constexpr int kMaxPageSize = 1000;

template <typename T>
struct Page {
  std::vector<T> items;
  // Empty on the last page.
  std::string next_page_token;
};

// A dataset version's metadata and the blob (blob_store.h) holding the rows
// it added (its dataset file).
struct DatasetVersionRecord {
  store::DatasetMeta meta;
  std::string rows_blob;
};

// A snapshot's metadata and the blob holding its snapshot file.
struct SnapshotRecord {
  store::SnapshotMeta meta;
  std::string payload_blob;
};

// Filters of ListSnapshots; empty fields do not filter.
struct SnapshotFilter {
  std::string dataset_id;
  std::string method;
};

// Lookups; every call sees the state of its transaction.
class MetadataReader {
 public:
  virtual ~MetadataReader() = default;

  // Version `version` of a dataset, or its latest version.
  virtual absl::StatusOr<DatasetVersionRecord> GetDataset(
      absl::string_view dataset_id,
      std::optional<int64_t> version = std::nullopt) = 0;
  // The latest version of the dataset named `name`.
  virtual absl::StatusOr<DatasetVersionRecord> GetDatasetByName(
      absl::string_view name) = 0;
  // The latest version of every dataset, newest dataset first (by the
  // creation of version 1, then id).
  virtual absl::StatusOr<Page<DatasetVersionRecord>> ListDatasets(
      const PageRequest& page) = 0;
  // The number of datasets.
  virtual absl::StatusOr<int64_t> CountDatasets() = 0;
  // Every version of a dataset, version 1 first.
  virtual absl::StatusOr<std::vector<DatasetVersionRecord>> ListDatasetVersions(
      absl::string_view dataset_id) = 0;

  virtual absl::StatusOr<SnapshotRecord> GetSnapshot(
      absl::string_view snapshot_id) = 0;
  // Newest first (by created_unix_ms, then id).
  virtual absl::StatusOr<Page<SnapshotRecord>> ListSnapshots(
      const SnapshotFilter& filter, const PageRequest& page) = 0;

  // The number of snapshots.
  virtual absl::StatusOr<int64_t> CountSnapshots() = 0;

  virtual absl::StatusOr<store::JobRecord> GetJob(absl::string_view job_id) = 0;
  // Newest first (by created_unix_ms, then id).
  virtual absl::StatusOr<Page<store::JobRecord>> ListJobs(
      const JobFilter& filter, const PageRequest& page) = 0;
  // The number of jobs in each state that has any.
  virtual absl::StatusOr<
      std::vector<std::pair<store::JobRecord::State, int64_t>>>
  CountJobsByState() = 0;

  virtual absl::StatusOr<store::ModelInfo> GetModel(absl::string_view name) = 0;
  // Up to `limit` models whose names sort after `after` (from the first
  // when empty), by name.
  virtual absl::StatusOr<std::vector<store::ModelInfo>> ListModels(
      absl::string_view after, int limit) = 0;
  // The number of models.
  virtual absl::StatusOr<int64_t> CountModels() = 0;
  virtual absl::StatusOr<store::ModelVersion> GetModelVersion(
      absl::string_view model_name, int64_t version) = 0;
  // Newest version first; NotFound for an unknown model.
  virtual absl::StatusOr<Page<store::ModelVersion>> ListModelVersions(
      absl::string_view model_name, const PageRequest& page) = 0;
  // The versions of every model that point at a snapshot.
  virtual absl::StatusOr<std::vector<store::ModelVersion>>
  ListVersionsOfSnapshot(absl::string_view snapshot_id) = 0;
  virtual absl::StatusOr<store::ModelAlias> GetAlias(
      absl::string_view model_name, absl::string_view alias) = 0;
  // By alias name; NotFound for an unknown model.
  virtual absl::StatusOr<std::vector<store::ModelAlias>> ListAliases(
      absl::string_view model_name) = 0;

  // Every blob a record refers to (dataset rows, snapshot files), for the
  // blob store's sweep of unreferenced blobs.
  virtual absl::StatusOr<absl::flat_hash_set<std::string>>
  ReferencedBlobs() = 0;
  // Whether any record refers to `blob` (an indexed lookup).
  virtual absl::StatusOr<bool> IsBlobReferenced(absl::string_view blob) = 0;

  // A property of the store itself (e.g. where its records came from);
  // nullopt if unset.
  virtual absl::StatusOr<std::optional<std::string>> GetProperty(
      absl::string_view key) = 0;
};

// Lookups and changes inside one all-or-nothing transaction.
class MetadataTransaction : public MetadataReader {
 public:
  // Adds version 1 of a new dataset. AlreadyExists naming the id, or the
  // name and the dataset holding it (names are unique; an empty name is
  // none); InvalidArgument unless meta.version() is 1.
  virtual absl::Status CreateDataset(const DatasetVersionRecord& record) = 0;
  // Adds the next version of an existing dataset. NotFound for an unknown
  // dataset; FailedPrecondition naming both versions unless meta.version()
  // is the latest version + 1.
  virtual absl::Status AddDatasetVersion(
      const DatasetVersionRecord& record) = 0;
  // Deletes a dataset with all its versions (jobs and snapshots made from
  // it are kept: they record which rows they used).
  virtual absl::Status DeleteDataset(absl::string_view dataset_id) = 0;

  // AlreadyExists naming the id.
  virtual absl::Status CreateSnapshot(const SnapshotRecord& record) = 0;
  // FailedPrecondition naming the model versions that point at it (delete
  // them first, in the same transaction for a forced delete).
  virtual absl::Status DeleteSnapshot(absl::string_view snapshot_id) = 0;

  // AlreadyExists naming the id.
  virtual absl::Status CreateJob(const store::JobRecord& job) = 0;
  // Replaces an existing job's record (NotFound otherwise).
  virtual absl::Status UpdateJob(const store::JobRecord& job) = 0;
  virtual absl::Status DeleteJob(absl::string_view job_id) = 0;
  // The job a worker claims next (JobStore::Claim), locked for this
  // transaction: the oldest (by creation time, then id) job to resume,
  // INTERRUPTED or RUNNING or CANCELLING with heartbeat_unix_ms before
  // `stale_before_unix_ms` (its process stopped heartbeating), else the
  // oldest QUEUED job; nullopt when there is none. Two indexed lookups.
  virtual absl::StatusOr<std::optional<store::JobRecord>> NextClaimableJob(
      int64_t stale_before_unix_ms) = 0;

  // Publishes `snapshot_id` (NotFound unless it exists) as the next version
  // of the model `model_name`, created if new, and returns the version.
  // Aliases do not move: a caller moving `latest` does so in the same
  // transaction (SetAlias).
  virtual absl::StatusOr<store::ModelVersion> PublishModelVersion(
      absl::string_view model_name, absl::string_view snapshot_id,
      int64_t created_unix_ms) = 0;
  // FailedPrecondition naming the aliases that point at the version.
  virtual absl::Status DeleteModelVersion(absl::string_view model_name,
                                          int64_t version) = 0;
  // Points `alias` of a model at an existing version (NotFound otherwise),
  // creating or moving it.
  virtual absl::StatusOr<store::ModelAlias> SetAlias(
      absl::string_view model_name, absl::string_view alias, int64_t version,
      int64_t updated_unix_ms) = 0;
  virtual absl::Status DeleteAlias(absl::string_view model_name,
                                   absl::string_view alias) = 0;
  // Deletes a model with its versions and aliases (not their snapshots).
  virtual absl::Status DeleteModel(absl::string_view name) = 0;
  // Adds a whole model as another store held it (the record-file
  // migration): its versions keep their numbers and the model its
  // next_version. AlreadyExists if the name is taken, NotFound for a
  // version's unknown snapshot, FailedPrecondition for an alias on a
  // version the model does not have or a version at or above next_version.
  virtual absl::Status RestoreModel(
      const store::ModelInfo& model,
      absl::Span<const store::ModelVersion> versions,
      absl::Span<const store::ModelAlias> aliases) = 0;

  virtual absl::Status SetProperty(absl::string_view key,
                                   absl::string_view value) = 0;
};

// Thread-safe. Bodies run with the store's transaction open and must not
// call back into the store; they may run again only if they are retried by
// the caller, never by the store.
class MetadataStore {
 public:
  virtual ~MetadataStore() = default;

  // Runs `body` in a read-only transaction and returns what it returns
  // (absl::Status or absl::StatusOr<T>).
  template <typename Body>
  auto Read(Body&& body) {
    return Run<MetadataReader>(
        [this](absl::FunctionRef<absl::Status(MetadataReader&)> f) {
          return RunRead(f);
        },
        std::forward<Body>(body));
  }

  // Runs `body` in a read-write transaction: its changes are committed
  // (durably, before Write returns) if it returns OK, and none of them if it
  // returns an error, which Write returns. An error committing is returned
  // too, and nothing is changed.
  template <typename Body>
  auto Write(Body&& body) {
    return Run<MetadataTransaction>(
        [this](absl::FunctionRef<absl::Status(MetadataTransaction&)> f) {
          return RunWrite(f);
        },
        std::forward<Body>(body));
  }

  // The schema version of the backing database.
  virtual int SchemaVersion() const = 0;

  // A number that changes whenever the store may have changed since it was
  // last read: for a store only this process writes (SQLite), the number
  // of write transactions committed since it opened; for a store other
  // processes write too (PostgreSQL), a new number at every call. In-memory
  // caches of what the store holds tag an entry with the number read
  // before the lookup that filled it and serve it only while the number is
  // unchanged, so they never serve a state older than the last commit (one
  // atomic operation per hit).
  virtual uint64_t Commits() const = 0;

 protected:
  virtual absl::Status RunRead(
      absl::FunctionRef<absl::Status(MetadataReader&)> body) = 0;
  virtual absl::Status RunWrite(
      absl::FunctionRef<absl::Status(MetadataTransaction&)> body) = 0;

 private:
  template <typename Ops, typename Runner, typename Body>
  static auto Run(Runner&& runner, Body&& body) {
    using Result = std::invoke_result_t<Body&, Ops&>;
    if constexpr (std::is_same_v<Result, absl::Status>) {
      return runner([&](Ops& ops) { return body(ops); });
    } else {
      std::optional<Result> result;
      const absl::Status status = runner([&](Ops& ops) {
        result.emplace(body(ops));
        return result->status();
      });
      if (!status.ok()) return Result(status);
      return *std::move(result);
    }
  }
};

// The payload of a record: the serialised message in the record frame of
// the record's kind (its own magic per kind, e.g. "job record").
enum class RecordKind {
  kDatasetVersion,
  kSnapshot,
  kJob,
  kModel,
  kModelVersion,
  kModelAlias,
};
absl::StatusOr<std::string> EncodePayload(
    RecordKind kind, const google::protobuf::MessageLite& message);
// DataLoss naming `what` (e.g. "job job-0123456789abcdef") for a payload
// that fails its checksum or does not parse, FailedPrecondition for one of a
// newer format.
absl::Status DecodePayload(RecordKind kind, absl::string_view payload,
                           absl::string_view what,
                           google::protobuf::MessageLite* message);

// Page tokens: opaque to clients, web-safe base64 of a PageTokenState.
std::string EncodePageToken(absl::string_view list, int64_t key,
                            absl::string_view id);
// InvalidArgument naming "page_token" for a token that is not one of
// `list`'s.
absl::StatusOr<store::PageTokenState> DecodePageToken(absl::string_view list,
                                                      absl::string_view token);
// InvalidArgument naming "page_size" and its bounds.
absl::Status ValidatePageRequest(const PageRequest& page);

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_METADATA_STORE_H_
