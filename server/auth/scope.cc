#include "server/auth/scope.h"

#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>

namespace bnn::server {
namespace {

constexpr Scope kScopes[] = {Scope::kPredict, Scope::kTrain, Scope::kAdmin};

}  // namespace

absl::string_view ScopeToString(Scope scope) {
  switch (scope) {
    case Scope::kPredict:
      return "predict";
    case Scope::kTrain:
      return "train";
    case Scope::kAdmin:
      return "admin";
  }
  return "unknown";
}

absl::StatusOr<Scope> StringToScope(absl::string_view name) {
  for (const Scope scope : kScopes) {
    if (name == ScopeToString(scope)) return scope;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown scope '", name, "'; scopes are predict, train, admin"));
}

absl::StatusOr<ScopeSet> ScopeSet::Parse(absl::string_view list) {
  if (list.empty()) {
    return absl::InvalidArgumentError(
        "no scopes; give a comma-separated list of predict, train, admin");
  }
  ScopeSet set;
  for (const absl::string_view name : absl::StrSplit(list, ',')) {
    absl::StatusOr<Scope> scope = StringToScope(name);
    if (!scope.ok()) return scope.status();
    if (set.Contains(*scope)) {
      return absl::InvalidArgumentError(
          absl::StrCat("scope '", name, "' is listed twice"));
    }
    set.Add(*scope);
  }
  return set;
}

std::string ScopeSet::ToString() const {
  std::vector<absl::string_view> names;
  for (const Scope scope : kScopes) {
    if (Contains(scope)) names.push_back(ScopeToString(scope));
  }
  return absl::StrJoin(names, ",");
}

}  // namespace bnn::server
