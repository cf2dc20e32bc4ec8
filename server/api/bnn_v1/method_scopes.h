// The scope each bnn.v1.BnnService RPC needs: the one table, in
// method_scopes.cc (docs/api.md shows it; a test checks that it names every
// method of the service descriptor and that the docs agree).
#ifndef BNN_SERVER_API_BNN_V1_METHOD_SCOPES_H_
#define BNN_SERVER_API_BNN_V1_METHOD_SCOPES_H_

#include <utility>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/types/span.h>

#include "server/auth/scope.h"

namespace bnn::server {

// (method name as in the proto, scope) for every RPC of the service.
absl::Span<const std::pair<absl::string_view, Scope>> MethodScopes();

// The scope `method` needs; Internal for a name not in the table (a handler
// that passes a wrong name is refused, never let through).
absl::StatusOr<Scope> RequiredScope(absl::string_view method);

}  // namespace bnn::server

#endif  // BNN_SERVER_API_BNN_V1_METHOD_SCOPES_H_
