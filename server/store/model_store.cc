#include "server/store/model_store.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <spdlog/spdlog.h>

#include "bnn/status.h"

namespace bnn::server {
namespace {

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

absl::Status UnknownVersion(const Model& model, int64_t version) {
  const int64_t latest = LatestVersion(model);
  return absl::NotFoundError(absl::StrCat(
      "model '", model.info.name(), "' has no version ", version,
      latest == 0 ? " (it has no versions)"
                  : absl::StrCat(" (its latest is ", latest, ")")));
}

int UserAliases(const Model& model) {
  return static_cast<int>(std::count_if(
      model.aliases.begin(), model.aliases.end(),
      [](const store::ModelAlias& a) { return a.alias() != kLatestAlias; }));
}

// The whole model `name` as `r` sees it.
absl::StatusOr<Model> ReadModel(MetadataReader& r, absl::string_view name) {
  Model model;
  absl::StatusOr<store::ModelInfo> info = r.GetModel(name);
  if (absl::IsNotFound(info.status())) return UnknownModel(name);
  BNN_ASSIGN_OR_RETURN(model.info, std::move(info));
  PageRequest page;
  page.page_size = kMaxPageSize;
  do {
    BNN_ASSIGN_OR_RETURN(Page<store::ModelVersion> versions,
                         r.ListModelVersions(name, page));
    for (store::ModelVersion& v : versions.items) {
      model.versions.push_back(std::move(v));
    }
    page.page_token = std::move(versions.next_page_token);
  } while (!page.page_token.empty());
  std::reverse(model.versions.begin(), model.versions.end());
  BNN_ASSIGN_OR_RETURN(model.aliases, r.ListAliases(name));
  return model;
}

// Points `latest` at the newest version of `name`, or removes it if the
// model has no versions.
absl::Status MoveLatest(MetadataTransaction& tx, absl::string_view name,
                        int64_t now) {
  BNN_ASSIGN_OR_RETURN(const Model model, ReadModel(tx, name));
  const int64_t latest = LatestVersion(model);
  if (latest > 0) return tx.SetAlias(name, kLatestAlias, latest, now).status();
  absl::Status deleted = tx.DeleteAlias(name, kLatestAlias);
  if (absl::IsNotFound(deleted)) return absl::OkStatus();
  return deleted;
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

int64_t LatestVersion(const Model& model) {
  return model.versions.empty() ? 0 : model.versions.back().version();
}

std::vector<std::string> AliasesOf(const Model& model, int64_t version) {
  std::vector<std::string> aliases;
  for (const store::ModelAlias& alias : model.aliases) {
    if (alias.version() == version) aliases.push_back(alias.alias());
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
    const Options& options, SnapshotStore* snapshots) {
  BNN_RETURN_IF_ERROR(options.Validate());
  return std::unique_ptr<ModelStore>(new ModelStore(options, snapshots));
}

absl::StatusOr<store::ModelVersion> ModelStore::PublishIn(
    MetadataTransaction& tx, absl::string_view name,
    absl::string_view snapshot_id,
    absl::Span<const std::string> aliases) const {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  std::set<std::string> new_aliases;
  for (size_t i = 0; i < aliases.size(); ++i) {
    BNN_RETURN_IF_ERROR(
        ValidateUserAlias(absl::StrCat("aliases[", i, "]"), aliases[i]));
    new_aliases.insert(aliases[i]);
  }
  {
    absl::StatusOr<SnapshotRecord> snapshot = tx.GetSnapshot(snapshot_id);
    if (absl::IsNotFound(snapshot.status())) {
      return absl::NotFoundError(
          absl::StrCat("snapshot_id '", snapshot_id, "' not found"));
    }
    BNN_RETURN_IF_ERROR(snapshot.status());
  }
  const int64_t now = absl::ToUnixMillis(absl::Now());
  absl::StatusOr<Model> existing = ReadModel(tx, name);
  Model model;
  if (existing.ok()) {
    model = *std::move(existing);
  } else if (absl::IsNotFound(existing.status())) {
    BNN_ASSIGN_OR_RETURN(const int64_t models, tx.CountModels());
    if (models >= options_.max_models) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server holds ", models, " models, its limit (--max-models = ",
          options_.max_models, "); delete one to publish '", name, "'"));
    }
  } else {
    return existing.status();
  }
  if (static_cast<int>(model.versions.size()) >= options_.max_versions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", name, "' has ", model.versions.size(),
        " versions, the limit (--max-model-versions = ", options_.max_versions,
        "); delete the model or force-delete old snapshots to publish more"));
  }
  int user_aliases = UserAliases(model);
  for (const std::string& alias : new_aliases) {
    if (std::none_of(
            model.aliases.begin(), model.aliases.end(),
            [&](const store::ModelAlias& a) { return a.alias() == alias; })) {
      ++user_aliases;
    }
  }
  if (user_aliases > options_.max_aliases) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "model '", name, "' would have ", user_aliases,
        " aliases besides latest, more than the limit (--max-model-aliases "
        "= ",
        options_.max_aliases, ")"));
  }
  BNN_ASSIGN_OR_RETURN(const store::ModelVersion version,
                       tx.PublishModelVersion(name, snapshot_id, now));
  BNN_RETURN_IF_ERROR(
      tx.SetAlias(name, kLatestAlias, version.version(), now).status());
  for (const std::string& alias : new_aliases) {
    BNN_RETURN_IF_ERROR(
        tx.SetAlias(name, alias, version.version(), now).status());
  }
  return version;
}

absl::StatusOr<Model> ModelStore::Publish(
    absl::string_view name, absl::string_view snapshot_id,
    absl::Span<const std::string> aliases) {
  int64_t version = 0;
  BNN_ASSIGN_OR_RETURN(
      Model model,
      metadata().Write([&](MetadataTransaction& tx) -> absl::StatusOr<Model> {
        BNN_ASSIGN_OR_RETURN(const store::ModelVersion published,
                             PublishIn(tx, name, snapshot_id, aliases));
        version = published.version();
        return ReadModel(tx, name);
      }));
  spdlog::info("model {} version {} published: snapshot {}", std::string(name),
               version, std::string(snapshot_id));
  return model;
}

absl::Status ModelStore::PublishFromJob(MetadataTransaction& tx,
                                        absl::string_view name,
                                        absl::string_view snapshot_id) const {
  BNN_ASSIGN_OR_RETURN(const std::vector<store::ModelVersion> versions,
                       tx.ListVersionsOfSnapshot(snapshot_id));
  for (const store::ModelVersion& v : versions) {
    if (v.model_name() == name) return absl::OkStatus();
  }
  BNN_ASSIGN_OR_RETURN(const store::ModelVersion version,
                       PublishIn(tx, name, snapshot_id, {}));
  spdlog::info("model {} version {} published: snapshot {}", std::string(name),
               version.version(), std::string(snapshot_id));
  return absl::OkStatus();
}

absl::StatusOr<Model> ModelStore::Get(absl::string_view name) const {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  return metadata().Read([&](MetadataReader& r) { return ReadModel(r, name); });
}

absl::StatusOr<std::vector<Model>> ModelStore::List(absl::string_view after,
                                                    int limit,
                                                    bool* more) const {
  *more = false;
  return metadata().Read(
      [&](MetadataReader& r) -> absl::StatusOr<std::vector<Model>> {
        BNN_ASSIGN_OR_RETURN(const std::vector<store::ModelInfo> infos,
                             r.ListModels(after, limit + 1));
        std::vector<Model> models;
        for (const store::ModelInfo& info : infos) {
          if (static_cast<int>(models.size()) == limit) {
            *more = true;
            break;
          }
          BNN_ASSIGN_OR_RETURN(models.emplace_back(),
                               ReadModel(r, info.name()));
        }
        return models;
      });
}

absl::StatusOr<Model> ModelStore::SetAlias(absl::string_view name,
                                           absl::string_view alias,
                                           int64_t version) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  BNN_RETURN_IF_ERROR(ValidateUserAlias("alias", alias));
  if (version < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("version = ", version, " must be >= 1"));
  }
  BNN_ASSIGN_OR_RETURN(
      Model model,
      metadata().Write([&](MetadataTransaction& tx) -> absl::StatusOr<Model> {
        BNN_ASSIGN_OR_RETURN(const Model before, ReadModel(tx, name));
        if (std::none_of(before.versions.begin(), before.versions.end(),
                         [&](const store::ModelVersion& v) {
                           return v.version() == version;
                         })) {
          return UnknownVersion(before, version);
        }
        const bool is_new = std::none_of(
            before.aliases.begin(), before.aliases.end(),
            [&](const store::ModelAlias& a) { return a.alias() == alias; });
        if (is_new && UserAliases(before) >= options_.max_aliases) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "model '", name, "' has ", UserAliases(before),
              " aliases besides latest, the limit (--max-model-aliases = ",
              options_.max_aliases, "); delete one to add '", alias, "'"));
        }
        BNN_RETURN_IF_ERROR(
            tx.SetAlias(name, alias, version, absl::ToUnixMillis(absl::Now()))
                .status());
        return ReadModel(tx, name);
      }));
  spdlog::info("model {}: alias {} -> version {}", std::string(name),
               std::string(alias), version);
  return model;
}

absl::StatusOr<Model> ModelStore::DeleteAlias(absl::string_view name,
                                              absl::string_view alias) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  BNN_RETURN_IF_ERROR(ValidateUserAlias("alias", alias));
  BNN_ASSIGN_OR_RETURN(
      Model model,
      metadata().Write([&](MetadataTransaction& tx) -> absl::StatusOr<Model> {
        BNN_RETURN_IF_ERROR(ReadModel(tx, name).status());
        const absl::Status deleted = tx.DeleteAlias(name, alias);
        if (absl::IsNotFound(deleted)) {
          return absl::NotFoundError(
              absl::StrCat("model '", name, "' has no alias '", alias, "'"));
        }
        BNN_RETURN_IF_ERROR(deleted);
        return ReadModel(tx, name);
      }));
  spdlog::info("model {}: alias {} deleted", std::string(name),
               std::string(alias));
  return model;
}

absl::Status ModelStore::Delete(absl::string_view name) {
  BNN_RETURN_IF_ERROR(ValidateModelName("name", name));
  const absl::Status deleted = metadata().Write(
      [&](MetadataTransaction& tx) { return tx.DeleteModel(name); });
  if (absl::IsNotFound(deleted)) return UnknownModel(name);
  BNN_RETURN_IF_ERROR(deleted);
  spdlog::info("model {} deleted", std::string(name));
  return absl::OkStatus();
}

absl::StatusOr<ResolvedModel> ModelStore::Resolve(const ModelRef& ref) const {
  const std::string key = ref.version > 0
                              ? absl::StrCat(ref.name, ":", ref.version)
                              : absl::StrCat(ref.name, "@", ref.alias);
  // Read before the lookup: see MetadataStore::Commits.
  const uint64_t commits = metadata().Commits();
  {
    absl::MutexLock lock(&cache_mu_);
    const auto it = resolved_.find(key);
    if (it != resolved_.end() && it->second.commits == commits) {
      return it->second.resolved;
    }
  }
  BNN_ASSIGN_OR_RETURN(ResolvedModel resolved, ResolveInStore(ref));
  absl::MutexLock lock(&cache_mu_);
  if (resolved_.size() >= kMaxCachedResolutions) resolved_.clear();
  resolved_[key] = CachedResolution{resolved, commits};
  return resolved;
}

absl::StatusOr<ResolvedModel> ModelStore::ResolveInStore(
    const ModelRef& ref) const {
  return metadata().Read(
      [&](MetadataReader& r) -> absl::StatusOr<ResolvedModel> {
        int64_t version = ref.version;
        if (version == 0) {
          absl::StatusOr<store::ModelAlias> alias =
              r.GetAlias(ref.name, ref.alias);
          if (absl::IsNotFound(alias.status())) {
            BNN_ASSIGN_OR_RETURN(const Model model, ReadModel(r, ref.name));
            if (ref.alias == kLatestAlias) {
              return absl::NotFoundError(
                  absl::StrCat("model '", ref.name, "' has no versions"));
            }
            std::vector<std::string> known = {std::string(kLatestAlias)};
            for (const store::ModelAlias& a : model.aliases) {
              if (a.alias() != kLatestAlias) known.push_back(a.alias());
            }
            std::sort(known.begin(), known.end());
            return absl::NotFoundError(absl::StrCat(
                "model '", ref.name, "' has no alias '", ref.alias,
                "' (its aliases: ", absl::StrJoin(known, ", "), ")"));
          }
          BNN_RETURN_IF_ERROR(alias.status());
          version = alias->version();
        }
        absl::StatusOr<store::ModelVersion> found =
            r.GetModelVersion(ref.name, version);
        if (absl::IsNotFound(found.status())) {
          BNN_ASSIGN_OR_RETURN(const Model model, ReadModel(r, ref.name));
          return UnknownVersion(model, version);
        }
        BNN_RETURN_IF_ERROR(found.status());
        return ResolvedModel{ref.name, version, found->snapshot_id()};
      });
}

absl::Status ModelStore::DeleteSnapshot(absl::string_view snapshot_id,
                                        bool force) {
  std::vector<std::string> removed;
  BNN_RETURN_IF_ERROR(snapshots_->Delete(
      snapshot_id, [&](MetadataTransaction& tx) -> absl::Status {
        BNN_ASSIGN_OR_RETURN(const std::vector<store::ModelVersion> versions,
                             tx.ListVersionsOfSnapshot(snapshot_id));
        if (versions.empty()) return absl::OkStatus();
        // Per model: its versions of the snapshot, and the aliases on them.
        std::map<std::string,
                 std::pair<std::vector<int64_t>, std::set<std::string>>>
            uses;
        for (const store::ModelVersion& v : versions) {
          BNN_ASSIGN_OR_RETURN(const Model model,
                               ReadModel(tx, v.model_name()));
          auto& [numbers, aliases] = uses[v.model_name()];
          numbers.push_back(v.version());
          for (std::string& alias : AliasesOf(model, v.version())) {
            aliases.insert(std::move(alias));
          }
        }
        if (!force) {
          std::vector<std::string> references;
          for (const auto& [name, use] : uses) {
            const auto& [numbers, aliases] = use;
            references.push_back(absl::StrCat(
                name, numbers.size() == 1 ? " version " : " versions ",
                absl::StrJoin(numbers, ", "),
                aliases.empty()
                    ? ""
                    : absl::StrCat(" (aliases ", absl::StrJoin(aliases, ", "),
                                   ")")));
          }
          return absl::FailedPreconditionError(absl::StrCat(
              "snapshot_id '", snapshot_id, "' is published as model ",
              absl::StrJoin(references, "; "),
              "; delete or move those first, or set force to remove the "
              "versions with the snapshot"));
        }
        const int64_t now = absl::ToUnixMillis(absl::Now());
        for (const auto& [name, use] : uses) {
          const auto& [numbers, aliases] = use;
          for (const std::string& alias : aliases) {
            BNN_RETURN_IF_ERROR(tx.DeleteAlias(name, alias));
          }
          for (const int64_t number : numbers) {
            BNN_RETURN_IF_ERROR(tx.DeleteModelVersion(name, number));
          }
          BNN_RETURN_IF_ERROR(MoveLatest(tx, name, now));
          removed.push_back(name);
        }
        return absl::OkStatus();
      }));
  for (const std::string& name : removed) {
    spdlog::warn("model {}: versions of snapshot {} removed (forced delete)",
                 name, std::string(snapshot_id));
  }
  return absl::OkStatus();
}

int64_t ModelStore::size() const {
  return metadata()
      .Read([](MetadataReader& r) { return r.CountModels(); })
      .value_or(0);
}

}  // namespace bnn::server
