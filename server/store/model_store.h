// Named models, kept in the MetadataStore (metadata_store.h) as its
// ModelInfo, ModelVersion and ModelAlias records (metadata.proto). A model has
// versions 1, 2, ... (each a snapshot id) and aliases: `latest` always names
// the newest version (it is moved by every publish and by every removal of
// the newest version, in the same transaction), every other alias moves only
// when asked. Every change is one transaction, so an alias move is atomic
// and a crash leaves the old or the new model.
//
// A reference ("m", "m@stable", "m:3") is resolved to a snapshot id in one
// read transaction, so that a caller sees either the alias's old or its new
// version, never an error, while the alias moves. The store is also the one
// way the server deletes snapshots (DeleteSnapshot), so that no version can
// point at a deleted snapshot.
#ifndef BNN_SERVER_STORE_MODEL_STORE_H_
#define BNN_SERVER_STORE_MODEL_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/types/span.h>

#include "server/store/metadata_store.h"
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

// A model as the store keeps it: its record, its versions (oldest first)
// and its aliases (by name, `latest` included).
struct Model {
  store::ModelInfo info;
  std::vector<store::ModelVersion> versions;
  std::vector<store::ModelAlias> aliases;
};

// The newest version of `model`, 0 if it has none.
int64_t LatestVersion(const Model& model);
// The aliases on `version` of `model`, kLatestAlias included, sorted.
std::vector<std::string> AliasesOf(const Model& model, int64_t version);

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

  // The models of the snapshot store's metadata store. `snapshots` is
  // borrowed and must outlive the store: published snapshots must exist in
  // it, and DeleteSnapshot deletes from it. InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<ModelStore>> Open(
      const Options& options, SnapshotStore* snapshots);

  // Publishes `snapshot_id` (which must exist: NotFound otherwise) as the
  // next version of the model `name`, created if new, and points `aliases`
  // (user aliases, see ValidateUserAlias; repeats are ignored) at it.
  // Returns the model as it is afterwards; the new version is its last.
  // ResourceExhausted naming the flag at --max-models, --max-model-versions
  // or --max-model-aliases.
  absl::StatusOr<Model> Publish(absl::string_view name,
                                absl::string_view snapshot_id,
                                absl::Span<const std::string> aliases = {});
  // Publish for a training job that succeeded with `snapshot_id`
  // (StartTraining with a model name), inside the transaction `tx` that
  // records the job's success and the snapshot: idempotent, so that a job
  // whose hook runs again after a restart does not publish twice (if a
  // version of `name` already points at `snapshot_id`, nothing changes).
  absl::Status PublishFromJob(MetadataTransaction& tx, absl::string_view name,
                              absl::string_view snapshot_id) const;

  // NotFound for an unknown name, DataLoss for an unreadable record.
  absl::StatusOr<Model> Get(absl::string_view name) const;

  // Up to `limit` models whose names sort after `after` (all when empty),
  // by name; `*more` says whether further ones exist.
  absl::StatusOr<std::vector<Model>> List(absl::string_view after, int limit,
                                          bool* more) const;

  // Points user alias `alias` at `version` (which must exist), creating or
  // moving it. InvalidArgument for kLatestAlias, which cannot be set.
  absl::StatusOr<Model> SetAlias(absl::string_view name,
                                 absl::string_view alias, int64_t version);
  // Removes a user alias; NotFound if the model has no such alias.
  absl::StatusOr<Model> DeleteAlias(absl::string_view name,
                                    absl::string_view alias);
  // Forgets a model (also an unreadable one); its snapshots stay.
  absl::Status Delete(absl::string_view name);

  // The snapshot `ref` names now: NotFound for an unknown model, alias or
  // version (or a model without versions), DataLoss for an unreadable
  // record. Resolutions are cached while the metadata store commits nothing
  // (MetadataStore::Commits), so a hit costs no lookup and never returns
  // the target of a moved alias.
  absl::StatusOr<ResolvedModel> Resolve(const ModelRef& ref) const;

  // Deletes a snapshot from the snapshot store unless model versions point
  // at it: then FailedPrecondition naming each model, its versions and the
  // aliases on them, or, with `force`, those versions (and their aliases)
  // are removed from their models in the same transaction (`latest` falls
  // back to the newest remaining version). Errors of SnapshotStore::Delete
  // are returned as they are.
  absl::Status DeleteSnapshot(absl::string_view snapshot_id, bool force);

  // Models.
  int64_t size() const;

 private:
  ModelStore(const Options& options, SnapshotStore* snapshots)
      : options_(options), snapshots_(snapshots) {}
  // Publishes in `tx` (see Publish).
  absl::StatusOr<store::ModelVersion> PublishIn(
      MetadataTransaction& tx, absl::string_view name,
      absl::string_view snapshot_id,
      absl::Span<const std::string> aliases) const;

  // Resolve's lookup in the store.
  absl::StatusOr<ResolvedModel> ResolveInStore(const ModelRef& ref) const;

  // A resolution and the metadata store's Commits() read before its lookup.
  struct CachedResolution {
    ResolvedModel resolved;
    uint64_t commits = 0;
  };
  // Resolutions kept at most (the cache is emptied when it is full).
  static constexpr size_t kMaxCachedResolutions = 4096;

  const Options options_;
  SnapshotStore* const snapshots_;
  MetadataStore& metadata() const { return snapshots_->metadata(); }
  mutable absl::Mutex cache_mu_;
  // By reference, "NAME@ALIAS" or "NAME:VERSION".
  mutable absl::flat_hash_map<std::string, CachedResolution> resolved_
      ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_MODEL_STORE_H_
