#include "server/api/bnn_v1/method_scopes.h"

#include <absl/strings/str_cat.h>

namespace bnn::server {
namespace {

// predict: serving (Predict, Acquire, Evaluate), and reading snapshots and
// models. train: data, training
// jobs, and publishing models and moving their aliases (what a training
// pipeline does). admin: what destroys data or moves whole snapshots in or
// out (and, by ScopeSet::Grants, everything else).
constexpr std::pair<absl::string_view, Scope> kMethodScopes[] = {
    {"Predict", Scope::kPredict},       {"Acquire", Scope::kPredict},
    {"ListSnapshots", Scope::kPredict}, {"GetSnapshot", Scope::kPredict},
    {"ListMethods", Scope::kPredict},   {"UploadDataset", Scope::kTrain},
    {"AppendRows", Scope::kTrain},      {"GetDataset", Scope::kTrain},
    {"ListDatasets", Scope::kTrain},    {"StartTraining", Scope::kTrain},
    {"GetJob", Scope::kTrain},          {"CancelJob", Scope::kTrain},
    {"ListJobs", Scope::kTrain},        {"WatchJob", Scope::kTrain},
    {"DeleteSnapshot", Scope::kAdmin},  {"ExportSnapshot", Scope::kAdmin},
    {"ImportSnapshot", Scope::kAdmin},  {"ListModels", Scope::kPredict},
    {"GetModel", Scope::kPredict},      {"PublishModel", Scope::kTrain},
    {"SetAlias", Scope::kTrain},        {"DeleteAlias", Scope::kTrain},
    {"DeleteModel", Scope::kAdmin},     {"DeleteDataset", Scope::kAdmin},
    {"Evaluate", Scope::kPredict},
};

}  // namespace

absl::Span<const std::pair<absl::string_view, Scope>> MethodScopes() {
  return kMethodScopes;
}

absl::StatusOr<Scope> RequiredScope(absl::string_view method) {
  for (const auto& [name, scope] : kMethodScopes) {
    if (name == method) return scope;
  }
  return absl::InternalError(
      absl::StrCat("RPC ", method, " has no scope in method_scopes.cc"));
}

}  // namespace bnn::server
