// Named models on disk: <dir>/<name>.model, one store::ModelRecord per model
// in the checksummed record frame (bnn/io/record.h). A model has versions
// 1, 2, ... (each a snapshot id) and aliases: `latest` is always the newest
// version (it is derived, never stored), every other alias moves only when
// asked. Every change rewrites the model's record at once
// (bnn::WriteFileAtomically: temp file, fsync, rename), so an alias move is
// one atomic write and a crash leaves the old or the new model.
//
// Records are held in memory; a reference ("m", "m@stable", "m:3") is
// resolved to a snapshot id under the store's lock, so that a caller sees
// either the alias's old or its new version, never an error, while the alias
// moves. The store is also the one way the server deletes snapshots
// (DeleteSnapshot), so that no version can point at a deleted snapshot.
#ifndef BNN_SERVER_STORE_MODEL_STORE_H_
#define BNN_SERVER_STORE_MODEL_STORE_H_

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
#include <absl/types/span.h>

#include "server/store/snapshot_store.h"
#include "store/store.pb.h"

namespace bnn::server {

// The alias of a model's newest version; it moves by itself.
inline constexpr absl::string_view kLatestAlias = "latest";
// Model names: [A-Za-z0-9][A-Za-z0-9._-]{0,127} (safe as file names).
inline constexpr int kMaxModelNameChars = 128;
// User aliases: [a-z][a-z0-9_-]{0,63}.
inline constexpr int kMaxAliasChars = 64;

// InvalidArgument naming `field` unless `name` is a model name.
absl::Status ValidateModelName(absl::string_view field, absl::string_view name);
// InvalidArgument naming `field` unless `alias` is an alias a client may set:
// of the alias form and not kLatestAlias.
absl::Status ValidateUserAlias(absl::string_view field,
                               absl::string_view alias);

// A parsed model reference: "NAME" (= NAME@latest), "NAME@ALIAS" or
// "NAME:VERSION".
struct ModelRef {
  std::string name;
  // Set unless `version` is.
  std::string alias;
  // > 0 for "NAME:VERSION".
  int64_t version = 0;
};
// InvalidArgument naming `field` for a reference of another form.
absl::StatusOr<ModelRef> ParseModelRef(absl::string_view field,
                                       absl::string_view ref);

// The newest version of `model`, 0 if it has none.
int64_t LatestVersion(const store::ModelRecord& model);
// The aliases on `version` of `model`, kLatestAlias included, sorted.
std::vector<std::string> AliasesOf(const store::ModelRecord& model,
                                   int64_t version);

// What a reference resolved to.
struct ResolvedModel {
  std::string name;
  int64_t version = 0;
  std::string snapshot_id;
};

// Thread-safe.
class ModelStore {
 public:
  struct Options {
    // Models the store holds at most (--max-models); publishing a new name
    // beyond it is refused with ResourceExhausted.
    int max_models = 1000;
    // Versions one model holds at most (--max-model-versions); a publish
    // beyond it is refused (delete the model, or force-delete snapshots of
    // old versions, to make room).
    int max_versions = 1000;
    // User aliases of one model at most, `latest` not counted
    // (--max-model-aliases).
    int max_aliases = 32;

    // InvalidArgument naming the flag and its bound.
    absl::Status Validate() const;
  };

  // Opens `dir` (created if missing) and reads every record. A record that
  // cannot be read (torn, corrupt, newer format) or that is inconsistent
  // stays indexed with its error, which every lookup of the model returns
  // (DataLoss, or FailedPrecondition for a newer format), and is logged;
  // DeleteModel removes it. `snapshots` is borrowed and must outlive the
  // store: published snapshots must exist in it, and DeleteSnapshot deletes
  // from it.
  static absl::StatusOr<std::unique_ptr<ModelStore>> Open(
      std::string dir, const Options& options, SnapshotStore* snapshots);

  // Publishes `snapshot_id` (which must exist: NotFound otherwise) as the
  // next version of the model `name`, created if new, and points `aliases`
  // (user aliases, see ValidateUserAlias; repeats are ignored) at it.
  // Returns the model as it is afterwards; the new version is its last.
  // ResourceExhausted naming the flag at --max-models, --max-model-versions
  // or --max-model-aliases.
  absl::StatusOr<store::ModelRecord> Publish(
      absl::string_view name, absl::string_view snapshot_id,
      absl::Span<const std::string> aliases = {});
  // Publish for a training job that succeeded with `snapshot_id`
  // (StartTraining with a model name): idempotent, so that a job whose hook
  // runs again after a restart does not publish twice. If a version of
  // `name` already points at `snapshot_id`, the model is returned as it is.
  absl::StatusOr<store::ModelRecord> PublishFromJob(
      absl::string_view name, absl::string_view snapshot_id);

  // NotFound for an unknown name, the record's error for an unreadable one.
  absl::StatusOr<store::ModelRecord> Get(absl::string_view name) const;

  // Up to `limit` readable models whose names sort after `after` (all when
  // empty), by name; `*more` says whether further ones exist.
  std::vector<store::ModelRecord> List(absl::string_view after, int limit,
                                       bool* more) const;

  // Points user alias `alias` at `version` (which must exist), creating or
  // moving it. InvalidArgument for kLatestAlias, which cannot be set.
  absl::StatusOr<store::ModelRecord> SetAlias(absl::string_view name,
                                              absl::string_view alias,
                                              int64_t version);
  // Removes a user alias; NotFound if the model has no such alias.
  absl::StatusOr<store::ModelRecord> DeleteAlias(absl::string_view name,
                                                 absl::string_view alias);
  // Forgets a model (also an unreadable one); its snapshots stay.
  absl::Status Delete(absl::string_view name);

  // The snapshot `ref` names now: NotFound for an unknown model, alias or
  // version (or a model without versions), the record's error for an
  // unreadable model.
  absl::StatusOr<ResolvedModel> Resolve(const ModelRef& ref) const;

  // Deletes a snapshot from the snapshot store unless model versions point
  // at it: then FailedPrecondition naming each model, its versions and the
  // aliases on them, or, with `force`, those versions (and their aliases)
  // are removed from their models first. Unreadable model records are
  // not consulted (they serve nothing). Errors of SnapshotStore::Delete are
  // returned as they are.
  absl::Status DeleteSnapshot(absl::string_view snapshot_id, bool force);

  // The models whose versions point at `snapshot_id`, each as
  // "NAME versions 2, 3 (aliases latest, stable)"; empty if none.
  std::vector<std::string> References(absl::string_view snapshot_id) const;

  // Readable models.
  int64_t size() const;

 private:
  struct Entry {
    absl::Status status;  // why the record is unreadable, or OK
    store::ModelRecord record;
  };

  ModelStore(std::string dir, const Options& options, SnapshotStore* snapshots)
      : dir_(std::move(dir)), options_(options), snapshots_(snapshots) {}
  std::string PathOf(absl::string_view name) const;
  // Reads and checks one record file when the store opens.
  Entry Load(const std::string& name) const;
  // The readable record of `name`, for a writer.
  absl::StatusOr<store::ModelRecord> ReadableRecord(
      absl::string_view name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Writes `record` durably and then makes it the model's record in memory.
  absl::Status Commit(const store::ModelRecord& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::StatusOr<store::ModelRecord> PublishLocked(
      absl::string_view name, absl::string_view snapshot_id,
      absl::Span<const std::string> aliases)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const std::string dir_;
  const Options options_;
  SnapshotStore* const snapshots_;
  // Held through every change (check, write, swap in memory), so that
  // changes and snapshot deletions happen one at a time; lookups take only
  // mu_, and never wait for a write.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_MODEL_STORE_H_
