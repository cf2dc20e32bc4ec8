#include "server/api/inference_v2/method_scopes.h"

#include <absl/strings/str_cat.h>

namespace bnn::server::oip {
namespace {

// Health needs no token; the model-level calls reveal which models exist,
// so they need predict, as GetModel and Predict do; ServerMetadata names
// the server's version, which is no business of an anonymous caller.
constexpr std::pair<absl::string_view, std::optional<Scope>> kMethodScopes[] = {
    {"ServerLive", std::nullopt},       {"ServerReady", std::nullopt},
    {"ModelReady", Scope::kPredict},    {"ServerMetadata", Scope::kPredict},
    {"ModelMetadata", Scope::kPredict}, {"ModelInfer", Scope::kPredict},
};

}  // namespace

absl::Span<const std::pair<absl::string_view, std::optional<Scope>>>
MethodScopes() {
  return kMethodScopes;
}

absl::StatusOr<std::optional<Scope>> RequiredScope(absl::string_view method) {
  for (const auto& [name, scope] : kMethodScopes) {
    if (name == method) return scope;
  }
  return absl::InternalError(absl::StrCat(
      "RPC ", method, " has no scope in inference_v2/method_scopes.cc"));
}

}  // namespace bnn::server::oip
