// The scope each inference.GRPCInferenceService RPC (and its REST
// endpoint) needs: the one table, in method_scopes.cc (docs/api.md shows
// it; a test checks that it names every method of the service descriptor
// and that the docs agree). The health checks ServerLive and ServerReady
// need none, as grpc.health.v1 and /healthz need none: orchestrators probe
// them without credentials, and they reveal nothing but liveness.
#ifndef BNN_SERVER_API_INFERENCE_V2_METHOD_SCOPES_H_
#define BNN_SERVER_API_INFERENCE_V2_METHOD_SCOPES_H_

#include <optional>
#include <utility>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/types/span.h>

#include "server/auth/scope.h"

namespace bnn::server::oip {

// (method name as in the proto, scope, or nullopt for none) for every RPC
// of the service.
absl::Span<const std::pair<absl::string_view, std::optional<Scope>>>
MethodScopes();

// The scope `method` needs (nullopt: none); Internal for a name not in the
// table (a handler that passes a wrong name is refused, never let through).
absl::StatusOr<std::optional<Scope>> RequiredScope(absl::string_view method);

}  // namespace bnn::server::oip

#endif  // BNN_SERVER_API_INFERENCE_V2_METHOD_SCOPES_H_
