#include "server/store/model_store.h"

#include <algorithm>
#include <set>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/io/file.h"
#include "bnn/io/record.h"
#include "bnn/status.h"

#include "server/store/record_dir.h"

namespace bnn::server {
namespace {

constexpr absl::string_view kExtension = ".model";
constexpr RecordFormat kModelFormat{"BNNMODEL", 1, "model record"};
// The longest reference: a name, '@' and an alias.
constexpr size_t kMaxRefBytes = kMaxModelNameChars + 1 + kMaxAliasChars;

bool IsModelName(absl::string_view name) {
  if (name.empty() || name.size() > static_cast<size_t>(kMaxModelNameChars) ||
      !absl::ascii_isalnum(name[0])) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

bool IsAlias(absl::string_view alias) {
  if (alias.empty() || alias.size() > static_cast<size_t>(kMaxAliasChars) ||
      !absl::ascii_islower(alias[0])) {
    return false;
  }
  return std::all_of(alias.begin(), alias.end(), [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' ||
           c == '-';
  });
}

absl::Status UnknownModel(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("model '", name, "' not found"));
}

const store::ModelRecord::Version* FindVersion(const store::ModelRecord& model,
                                               int64_t version) {
  for (const store::ModelRecord::Version& v : model.versions()) {
    if (v.version() == version) return &v;
  }
  return nullptr;
}

absl::Status UnknownVersion(const store::ModelRecord& model, int64_t version) {
  const int64_t latest = LatestVersion(model);
  return absl::NotFoundError(absl::StrCat(
      "model '", model.name(), "' has no version ", version,
      latest == 0 ? " (it has no versions)"
                  : absl::StrCat(" (its latest is ", latest, ")")));
}

// Why a record read from `<name>.model` cannot be served, or OK: versions
// ascending below next_version, each with a snapshot, and aliases of the
// alias form on existing versions.
absl::Status CheckRecord(absl::string_view name,
                         const store::ModelRecord& record) {
  const auto bad = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat("model record of '", name, "' is inconsistent: ", what));
  };
  if (record.name() != name) {
    return bad(absl::StrCat("it holds model '", record.name(), "'"));
  }
  int64_t previous = 0;
  for (const store::ModelRecord::Version& v : record.versions()) {
    if (v.version() <= previous || v.version() >= record.next_version()) {
      return bad(absl::StrCat("version ", v.version(), " is out of order"));
    }
    if (v.snapshot_id().empty()) {
      return bad(absl::StrCat("version ", v.version(), " has no snapshot"));
    }
    previous = v.version();
  }
  for (const auto& [alias, version] : record.aliases()) {
    if (!IsAlias(alias) || alias == kLatestAlias) {
      return bad(absl::StrCat("alias '", alias, "' is not a user alias"));
    }
    if (FindVersion(record, version) == nullptr) {
      return bad(absl::StrCat("alias '", alias, "' names version ", version,
                              ", which does not exist"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelName(absl::string_view field,
                               absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  }
  if (name.size() > static_cast<size_t>(kMaxModelNameChars)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", name.size(), " characters; model names ",
                     "have at most ", kMaxModelNameChars));
  }
  if (!IsModelName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", name,
                     "' is not a model name: letters, digits, '.', '_' and "
                     "'-', starting with a letter or digit"));
  }
  return absl::OkStatus();
}

absl::Status ValidateUserAlias(absl::string_view field,
                               absl::string_view alias) {
  if (alias.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  }
  if (alias.size() > static_cast<size_t>(kMaxAliasChars)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", alias.size(), " characters; aliases ",
                     "have at most ", kMaxAliasChars));
  }
  if (!IsAlias(alias)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " '", alias,
        "' is not an alias: lower-case letters, digits, '_' and '-', "
        "starting with a letter"));
  }
  if (alias == kLatestAlias) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " is '", kLatestAlias,
        "', which always names the newest version and cannot be set or "
        "deleted"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelRef> ParseModelRef(absl::string_view field,
                                       absl::string_view ref) {
  if (ref.size() > kMaxRefBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " has ", ref.size(), " bytes; model references ",
                     "have at most ", kMaxRefBytes));
  }
  ModelRef parsed;
  absl::string_view name = ref;
  if (const size_t at = ref.find('@'); at != absl::string_view::npos) {
    name = ref.substr(0, at);
    parsed.alias = std::string(ref.substr(at + 1));
    if (!IsAlias(parsed.alias)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " '", ref, "' names alias '", parsed.alias,
          "', which is not an alias (NAME@ALIAS, ALIAS like stable)"));
    }
  } else if (const size_t colon = ref.find(':');
             colon != absl::string_view::npos) {
    name = ref.substr(0, colon);
    const absl::string_view number = ref.substr(colon + 1);
    if (!absl::SimpleAtoi(number, &parsed.version) || parsed.version < 1 ||
        !std::all_of(number.begin(), number.end(), absl::ascii_isdigit)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " '", ref, "' names version '", number,
                       "', which is not a version (NAME:VERSION, VERSION >= "
                       "1)"));
    }
  } else {
    parsed.alias = std::string(kLatestAlias);
  }
  if (!IsModelName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " '", ref,
        "' is not a model reference: NAME, NAME@ALIAS or NAME:VERSION, NAME "
        "of letters, digits, '.', '_' and '-'"));
  }
  parsed.name = std::string(name);
  return parsed;
}

int64_t LatestVersion(const store::ModelRecord& model) {
  return model.versions().empty() ? 0 : model.versions().rbegin()->version();
}

std::vector<std::string> AliasesOf(const store::ModelRecord& model,
                                   int64_t version) {
  std::vector<std::string> aliases;
  if (version == LatestVersion(model) && version > 0) {
    aliases.emplace_back(kLatestAlias);
  }
  for (const auto& [alias, target] : model.aliases()) {
    if (target == version) aliases.push_back(alias);
  }
  std::sort(aliases.begin(), aliases.end());
  return aliases;
}

absl::Status ModelStore::Options::Validate() const {
  for (const auto& [flag, value] : {std::pair{"--max-models", max_models},
                                    {"--max-model-versions", max_versions},
                                    {"--max-model-aliases", max_aliases}}) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " = ", value, " must be >= 1"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelStore>> ModelStore::Open(
    std::string dir, const Options& options, SnapshotStore* snapshots) {
  BNN_RETURN_IF_ERROR(options.Validate());
  BNN_ASSIGN_OR_RETURN(const std::vector<std::string> stems,
                       ScanRecordStems(dir, kExtension));
  std::unique_ptr<ModelStore> store(
      new ModelStore(std::move(dir), options, snapshots));
  absl::MutexLock lock(&store->mu_);
  for (const std::string& stem : stems) {
    if (!IsModelName(stem)) {
      spdlog::warn("models: ignoring {}.model, not named after a model", stem);
      continue;
    }
    store->models_[stem] = store->Load(stem);
  }
  return store;
}

ModelStore::Entry ModelStore::Load(const std::string& name) const {
  Entry entry;
  absl::StatusOr<uint32_t> read =
      ReadRecordFile(PathOf(name), kModelFormat, &entry.record);
  entry.status = read.ok() ? CheckRecord(name, entry.record) : read.status();
  if (!entry.status.ok()) {
    spdlog::error("model {} is unreadable: {}", name, entry.status.ToString());
    entry.record.Clear();
    entry.record.set_name(name);
  }
  return entry;
}

std::string ModelStore::PathOf(absl::string_view name) const {
  return absl::StrCat(dir_, "/", name, kExtension);
}

absl::StatusOr<store::ModelRecord> ModelStore::ReadableRecord(
    absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  const auto it = models_.find(name);
  if (it == models_.end()) return UnknownModel(name);
  if (!it->second.status.ok()) return it->second.status;
  return it->second.record;
}

absl::Status ModelStore::Commit(const store::ModelRecord& record) {
  BNN_RETURN_IF_ERROR(
      WriteRecordFile(PathOf(record.name()), kModelFormat, record));
  absl::MutexLock lock(&mu_);
  models_[record.name()] = Entry{absl::OkStatus(), record};
  return absl::OkStatus();
}

absl::StatusOr<store::ModelRecord> ModelStore::Publish(
    absl::string_view name, absl::string_view snapshot_id,
    absl::Span<const std::string> aliases) {
  absl::MutexLock write_lock(&write_mu_);
  return PublishLocked(name, snapshot_id, aliases);
}

absl::StatusOr<store::ModelRecord> ModelStore::PublishFromJob(
    absl::string_view name, absl::string_view snapshot_id) {
  absl::MutexLock write_lock(&write_mu_);
  absl::StatusOr<store::ModelRecord> existing = ReadableRecord(name);
  if (existing.ok()) {
    for (const store::ModelRecord::Version& v : existing->versions()) {
      if (v.snapshot_id() == snapshot_id) return existing;
    }
  }
  return PublishLocked(name, snapshot_id, {});
}

absl::StatusOr<store::ModelRecord> ModelStore::PublishLocked(
    absl::string_view name, absl::string_view snapshot_id,
    absl::Span<const std::string> aliases) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  std::set<std::string> new_aliases;
  for (size_t i = 0; i < aliases.size(); ++i) {
    BNN_RETURN_IF_ERROR(
        ValidateUserAlias(absl::StrCat("aliases[", i, "]"), aliases[i]));
    new_aliases.insert(aliases[i]);
  }
  BNN_RETURN_IF_ERROR(snapshots_->GetMeta(snapshot_id).status());
  const int64_t now = absl::ToUnixMillis(absl::Now());
  store::ModelRecord record;
  absl::StatusOr<store::ModelRecord> existing = ReadableRecord(name);
  if (existing.ok()) {
    record = *std::move(existing);
  } else if (absl::IsNotFound(existing.status())) {
    absl::MutexLock lock(&mu_);
    if (models_.size() >= static_cast<size_t>(options_.max_models)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server holds ", models_.size(),
          " models, its limit (--max-models = ", options_.max_models,
          "); delete one to publish '", name, "'"));
    }
    record.set_name(std::string(name));
    record.set_next_version(1);
    record.set_created_unix_ms(now);
  } else {
    return existing.status();
  }
  if (record.versions_size() >= options_.max_versions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", name, "' has ", record.versions_size(),
        " versions, the limit (--max-model-versions = ", options_.max_versions,
        "); delete the model or force-delete old snapshots to publish more"));
  }
  store::ModelRecord::Version* version = record.add_versions();
  version->set_version(record.next_version());
  version->set_snapshot_id(std::string(snapshot_id));
  version->set_created_unix_ms(now);
  record.set_next_version(record.next_version() + 1);
  for (const std::string& alias : new_aliases) {
    (*record.mutable_aliases())[alias] = version->version();
  }
  if (record.aliases_size() > options_.max_aliases) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", name, "' would have ", record.aliases_size(),
        " aliases besides latest, more than the limit (--max-model-aliases "
        "= ",
        options_.max_aliases, ")"));
  }
  record.set_updated_unix_ms(now);
  BNN_RETURN_IF_ERROR(Commit(record));
  spdlog::info("model {} version {} published: snapshot {}", std::string(name),
               version->version(), std::string(snapshot_id));
  return record;
}

absl::StatusOr<store::ModelRecord> ModelStore::Get(
    absl::string_view name) const {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  absl::MutexLock lock(&mu_);
  const auto it = models_.find(name);
  if (it == models_.end()) return UnknownModel(name);
  if (!it->second.status.ok()) return it->second.status;
  return it->second.record;
}

std::vector<store::ModelRecord> ModelStore::List(absl::string_view after,
                                                 int limit, bool* more) const {
  std::vector<store::ModelRecord> out;
  *more = false;
  absl::MutexLock lock(&mu_);
  for (auto it = after.empty() ? models_.begin() : models_.upper_bound(after);
       it != models_.end(); ++it) {
    if (!it->second.status.ok()) continue;
    if (static_cast<int>(out.size()) == limit) {
      *more = true;
      break;
    }
    out.push_back(it->second.record);
  }
  return out;
}

absl::StatusOr<store::ModelRecord> ModelStore::SetAlias(absl::string_view name,
                                                        absl::string_view alias,
                                                        int64_t version) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  BNN_RETURN_IF_ERROR(ValidateUserAlias("alias", alias));
  if (version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("version = ", version, " must be >= 1"));
  }
  absl::MutexLock write_lock(&write_mu_);
  BNN_ASSIGN_OR_RETURN(store::ModelRecord record, ReadableRecord(name));
  if (FindVersion(record, version) == nullptr) {
    return UnknownVersion(record, version);
  }
  auto& aliases = *record.mutable_aliases();
  if (aliases.count(std::string(alias)) == 0 &&
      aliases.size() >= static_cast<size_t>(options_.max_aliases)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", name, "' has ", aliases.size(),
        " aliases besides latest, the limit (--max-model-aliases = ",
        options_.max_aliases, "); delete one to add '", alias, "'"));
  }
  aliases[std::string(alias)] = version;
  record.set_updated_unix_ms(absl::ToUnixMillis(absl::Now()));
  BNN_RETURN_IF_ERROR(Commit(record));
  spdlog::info("model {}: alias {} -> version {}", std::string(name),
               std::string(alias), version);
  return record;
}

absl::StatusOr<store::ModelRecord> ModelStore::DeleteAlias(
    absl::string_view name, absl::string_view alias) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  BNN_RETURN_IF_ERROR(ValidateUserAlias("alias", alias));
  absl::MutexLock write_lock(&write_mu_);
  BNN_ASSIGN_OR_RETURN(store::ModelRecord record, ReadableRecord(name));
  if (record.mutable_aliases()->erase(std::string(alias)) == 0) {
    return absl::NotFoundError(
        absl::StrCat("model '", name, "' has no alias '", alias, "'"));
  }
  record.set_updated_unix_ms(absl::ToUnixMillis(absl::Now()));
  BNN_RETURN_IF_ERROR(Commit(record));
  spdlog::info("model {}: alias {} deleted", std::string(name),
               std::string(alias));
  return record;
}

absl::Status ModelStore::Delete(absl::string_view name) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  absl::MutexLock write_lock(&write_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (models_.count(name) == 0) return UnknownModel(name);
  }
  BNN_RETURN_IF_ERROR(RemoveFile(PathOf(name)));
  BNN_RETURN_IF_ERROR(SyncDirectory(dir_));
  absl::MutexLock lock(&mu_);
  models_.erase(models_.find(name));
  spdlog::info("model {} deleted", std::string(name));
  return absl::OkStatus();
}

absl::StatusOr<ResolvedModel> ModelStore::Resolve(const ModelRef& ref) const {
  absl::MutexLock lock(&mu_);
  const auto it = models_.find(ref.name);
  if (it == models_.end()) return UnknownModel(ref.name);
  if (!it->second.status.ok()) return it->second.status;
  const store::ModelRecord& model = it->second.record;
  int64_t version = ref.version;
  if (version == 0) {
    if (ref.alias == kLatestAlias) {
      version = LatestVersion(model);
      if (version == 0) {
        return absl::NotFoundError(
            absl::StrCat("model '", ref.name, "' has no versions"));
      }
    } else {
      const auto alias = model.aliases().find(ref.alias);
      if (alias == model.aliases().end()) {
        std::vector<std::string> known = {std::string(kLatestAlias)};
        for (const auto& [name, v] : model.aliases()) known.push_back(name);
        std::sort(known.begin(), known.end());
        return absl::NotFoundError(
            absl::StrCat("model '", ref.name, "' has no alias '", ref.alias,
                         "' (its aliases: ", absl::StrJoin(known, ", "), ")"));
      }
      version = alias->second;
    }
  }
  const store::ModelRecord::Version* found = FindVersion(model, version);
  if (found == nullptr) return UnknownVersion(model, version);
  return ResolvedModel{model.name(), version, found->snapshot_id()};
}

std::vector<std::string> ModelStore::References(
    absl::string_view snapshot_id) const {
  std::vector<std::string> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, entry] : models_) {
    if (!entry.status.ok()) continue;
    std::vector<std::string> versions;
    std::set<std::string> aliases;
    for (const store::ModelRecord::Version& v : entry.record.versions()) {
      if (v.snapshot_id() != snapshot_id) continue;
      versions.push_back(absl::StrCat(v.version()));
      for (std::string& alias : AliasesOf(entry.record, v.version())) {
        aliases.insert(std::move(alias));
      }
    }
    if (versions.empty()) continue;
    out.push_back(absl::StrCat(
        name, versions.size() == 1 ? " version " : " versions ",
        absl::StrJoin(versions, ", "),
        aliases.empty()
            ? ""
            : absl::StrCat(" (aliases ", absl::StrJoin(aliases, ", "), ")")));
  }
  return out;
}

absl::Status ModelStore::DeleteSnapshot(absl::string_view snapshot_id,
                                        bool force) {
  absl::MutexLock write_lock(&write_mu_);
  const std::vector<std::string> references = References(snapshot_id);
  if (!references.empty() && !force) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot_id '", snapshot_id, "' is published as model ",
        absl::StrJoin(references, "; "),
        "; delete or move those first, or set force to remove the versions "
        "with the snapshot"));
  }
  // The versions go first: a crash before the snapshot is deleted leaves an
  // unreferenced snapshot, never a version without its snapshot.
  std::vector<store::ModelRecord> changed;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, entry] : models_) {
      if (!entry.status.ok()) continue;
      store::ModelRecord record = entry.record;
      record.clear_versions();
      std::set<int64_t> gone;
      for (const store::ModelRecord::Version& v : entry.record.versions()) {
        if (v.snapshot_id() == snapshot_id) {
          gone.insert(v.version());
        } else {
          *record.add_versions() = v;
        }
      }
      if (gone.empty()) continue;
      auto* aliases = record.mutable_aliases();
      for (auto it = aliases->begin(); it != aliases->end();) {
        it = gone.count(it->second) > 0 ? aliases->erase(it) : std::next(it);
      }
      changed.push_back(std::move(record));
    }
  }
  const int64_t now = absl::ToUnixMillis(absl::Now());
  for (store::ModelRecord& record : changed) {
    record.set_updated_unix_ms(now);
    BNN_RETURN_IF_ERROR(Commit(record));
    spdlog::warn("model {}: versions of snapshot {} removed (forced delete)",
                 record.name(), std::string(snapshot_id));
  }
  return snapshots_->Delete(snapshot_id);
}

int64_t ModelStore::size() const {
  absl::MutexLock lock(&mu_);
  return std::count_if(models_.begin(), models_.end(),
                       [](const auto& kv) { return kv.second.status.ok(); });
}

}  // namespace bnn::server
