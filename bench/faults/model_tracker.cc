#include "bench/faults/model_tracker.h"

#include <algorithm>
#include <set>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

namespace bnn::faults {
namespace {

constexpr int kModelIndex = static_cast<int>(OpKind::kModel);

std::string DescribeVersions(const std::map<int64_t, std::string>& versions) {
  return absl::StrJoin(versions, ", ", [](std::string* out, const auto& v) {
    absl::StrAppend(out, v.first, "->", v.second);
  });
}

std::string DescribeAlias(std::optional<int64_t> version) {
  return version.has_value() ? absl::StrCat("version ", *version) : "nothing";
}

std::optional<int64_t> Find(const std::map<std::string, int64_t>& aliases,
                            const std::string& alias) {
  const auto it = aliases.find(alias);
  if (it == aliases.end()) return std::nullopt;
  return it->second;
}

std::map<int64_t, std::string> VersionsOf(const v1::ModelInfo& info) {
  std::map<int64_t, std::string> versions;
  for (const v1::ModelVersion& v : info.versions()) {
    versions[v.version()] = v.snapshot_id();
  }
  return versions;
}

// `latest` names the newest version (and latest_version agrees).
void CheckLatest(int cycle, const v1::ModelInfo& info,
                 const std::map<int64_t, std::string>& versions,
                 StoreModel& store) {
  if (versions.empty()) return;
  const int64_t newest = versions.rbegin()->first;
  const auto it = info.aliases().find("latest");
  if (it == info.aliases().end() || it->second != newest ||
      info.latest_version() != newest) {
    store.AddViolation(
        cycle, "changed",
        absl::StrCat("model ", info.name(), ": latest names ",
                     it == info.aliases().end() ? std::string("nothing")
                                                : absl::StrCat(it->second),
                     " (latest_version ", info.latest_version(),
                     ") but the newest version is ", newest));
  }
}

}  // namespace

const std::vector<std::string>& ModelTracker::UserAliases() {
  static const auto* aliases = new std::vector<std::string>{"stable", "canary"};
  return *aliases;
}

void ModelTracker::AckCall(const std::string& model, const ModelCall& call,
                           int64_t version) {
  TrackedModel& tracked = models_[model];
  if (call.publish) {
    tracked.versions[version] = call.snapshot_id;
    for (const std::string& alias : call.aliases) {
      tracked.aliases[alias] = version;
    }
  } else {
    tracked.aliases[call.alias] = call.version;
  }
}

void ModelTracker::AddPending(const std::string& model, const ModelCall& call) {
  models_[model].pending = call;
}

std::vector<int64_t> ModelTracker::Versions(const std::string& model) const {
  std::vector<int64_t> versions;
  const auto it = models_.find(model);
  if (it == models_.end()) return versions;
  for (const auto& [version, snapshot] : it->second.versions) {
    versions.push_back(version);
  }
  return versions;
}

void ModelTracker::Verify(client::BnnClient& client, int cycle,
                          StoreModel& store, Outcomes* outcomes) {
  for (auto& [name, model] : models_) {
    CheckModel(client, cycle, name, model, store, outcomes);
  }
  CheckJobModel(client, cycle, store);
}

void ModelTracker::CheckModel(client::BnnClient& client, int cycle,
                              const std::string& name, TrackedModel& model,
                              StoreModel& store, Outcomes* outcomes) {
  const std::optional<ModelCall> pending = std::move(model.pending);
  model.pending.reset();
  const absl::StatusOr<v1::ModelInfo> info = client.GetModel(name);
  if (!info.ok()) {
    if (absl::IsNotFound(info.status()) && model.versions.empty()) {
      if (pending.has_value()) ++outcomes->not_committed[kModelIndex];
      return;
    }
    store.AddViolation(cycle, "lost",
                       absl::StrCat("model ", name, " with versions ",
                                    DescribeVersions(model.versions),
                                    " was acknowledged but GetModel fails: ",
                                    info.status().ToString()));
    return;
  }
  const std::map<int64_t, std::string> now = VersionsOf(*info);
  for (const auto& [version, snapshot] : model.versions) {
    const auto it = now.find(version);
    if (it == now.end()) {
      store.AddViolation(
          cycle, "lost",
          absl::StrCat("model ", name, " version ", version, " (", snapshot,
                       ") was acknowledged but is gone"));
    } else if (it->second != snapshot) {
      store.AddViolation(
          cycle, "changed",
          absl::StrCat("model ", name, " version ", version, " was ", snapshot,
                       " and is now ", it->second));
    }
  }
  // A version nobody acknowledged: only the publish in flight at the kill,
  // numbered above every acknowledged one.
  const int64_t newest_acknowledged =
      model.versions.empty() ? 0 : model.versions.rbegin()->first;
  std::optional<int64_t> published;
  for (const auto& [version, snapshot] : now) {
    if (model.versions.count(version) > 0) continue;
    if (pending.has_value() && pending->publish && !published.has_value() &&
        snapshot == pending->snapshot_id && version > newest_acknowledged) {
      published = version;
      model.versions[version] = snapshot;
      continue;
    }
    store.AddViolation(
        cycle, "unknown",
        absl::StrCat("model ", name, " has version ", version, " (", snapshot,
                     ") that nobody published (acknowledged: ",
                     DescribeVersions(model.versions), ")"));
  }
  CheckLatest(cycle, *info, now, store);

  bool alias_moved = false;
  std::map<std::string, int64_t> seen_aliases(info->aliases().begin(),
                                              info->aliases().end());
  for (const std::string& alias : UserAliases()) {
    const std::optional<int64_t> seen = Find(seen_aliases, alias);
    const std::optional<int64_t> acknowledged = Find(model.aliases, alias);
    // Where the call in flight would have moved it.
    std::optional<int64_t> moved;
    if (pending.has_value() && !pending->publish && pending->alias == alias) {
      moved = pending->version;
    }
    const bool moved_by_publish =
        published.has_value() &&
        std::count(pending->aliases.begin(), pending->aliases.end(), alias) > 0;
    if (moved_by_publish) moved = published;
    if (moved_by_publish && seen != moved) {
      store.AddViolation(
          cycle, "partial",
          absl::StrCat("model ", name, ": the publish in flight made version ",
                       *published, " but alias ", alias, " names ",
                       DescribeAlias(seen), ", not the new version"));
    } else if (seen == moved && moved.has_value()) {
      model.aliases[alias] = *moved;
      alias_moved = alias_moved || seen != acknowledged;
    } else if (seen != acknowledged) {
      store.AddViolation(
          cycle, "changed",
          absl::StrCat(
              "model ", name, ": alias ", alias, " names ", DescribeAlias(seen),
              "; acknowledged ", DescribeAlias(acknowledged),
              moved.has_value() ? absl::StrCat(", or ", DescribeAlias(moved),
                                               " by the call in flight")
                                : std::string()));
    }
  }
  for (const auto& [alias, version] : seen_aliases) {
    if (alias == "latest" ||
        std::count(UserAliases().begin(), UserAliases().end(), alias) > 0) {
      continue;
    }
    store.AddViolation(
        cycle, "unknown",
        absl::StrCat("model ", name, " has alias ", alias, " that nobody set"));
  }
  if (pending.has_value()) {
    const bool committed =
        pending->publish ? published.has_value() : alias_moved;
    ++(committed ? outcomes->committed : outcomes->not_committed)[kModelIndex];
  }
}

void ModelTracker::CheckJobModel(client::BnnClient& client, int cycle,
                                 StoreModel& store) {
  // The snapshots of the jobs that published and succeeded, by snapshot id.
  std::map<std::string, std::string> expected;
  for (const v1::Job& job : store.SeenJobs()) {
    if (job.publish() && job.model_name() == kJobModel &&
        job.state() == v1::JOB_STATE_SUCCEEDED) {
      expected[job.snapshot_id()] = job.job_id();
    }
  }
  const absl::StatusOr<v1::ModelInfo> info = client.GetModel(kJobModel);
  if (!info.ok()) {
    if (absl::IsNotFound(info.status()) && expected.empty() &&
        job_versions_.empty()) {
      return;
    }
    store.AddViolation(cycle, "lost",
                       absl::StrCat("model ", kJobModel, " (", expected.size(),
                                    " jobs published to it) is unreadable: ",
                                    info.status().ToString()));
    return;
  }
  const std::map<int64_t, std::string> now = VersionsOf(*info);
  for (const auto& [version, snapshot] : job_versions_) {
    const auto it = now.find(version);
    if (it == now.end() || it->second != snapshot) {
      store.AddViolation(
          cycle, it == now.end() ? "lost" : "changed",
          absl::StrCat("model ", kJobModel, " version ", version, " was ",
                       snapshot, " and is now ",
                       it == now.end() ? std::string("gone") : it->second));
    }
  }
  std::map<std::string, int> published;
  for (const auto& [version, snapshot] : now) {
    ++published[snapshot];
    if (expected.count(snapshot) == 0) {
      store.AddViolation(cycle, "unknown",
                         absl::StrCat("model ", kJobModel, " version ", version,
                                      " is ", snapshot,
                                      ", the snapshot of no job that succeeded "
                                      "with publish"));
    }
  }
  for (const auto& [snapshot, job_id] : expected) {
    const int count = published.count(snapshot) > 0 ? published[snapshot] : 0;
    if (count != 1) {
      store.AddViolation(cycle, count == 0 ? "lost" : "changed",
                         absl::StrCat("job ", job_id,
                                      " succeeded with publish, but its "
                                      "snapshot ",
                                      snapshot, " is published as ", count,
                                      " versions of ", kJobModel));
    }
  }
  CheckLatest(cycle, *info, now, store);
  job_versions_ = now;
}

}  // namespace bnn::faults
