// Bearer-token authentication and scope checks for every RPC that needs a
// scope. Callers check before they look anything up, so a denial reveals
// nothing about the ids a request names.
#ifndef BNN_SERVER_AUTH_AUTHENTICATOR_H_
#define BNN_SERVER_AUTH_AUTHENTICATOR_H_

#include <memory>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/types/span.h>
#include <grpcpp/server_context.h>

#include "server/auth/scope.h"
#include "server/auth/token_file.h"

namespace bnn::server {

// Thread-safe: Authorize may run on any number of threads while Reload
// swaps the tokens.
class Authenticator {
 public:
  // Reads `token_file` (token_file.h). An empty path disables
  // authentication: every call is allowed. Errors name the file and line.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Create(
      std::string token_file);

  // Whether a token file is in use.
  bool enabled() const { return !token_file_.empty(); }
  // Tokens currently accepted.
  int num_tokens() const;

  // Reads the token file again (on SIGHUP). On any error the tokens in use
  // stay in use and the error is returned. FailedPrecondition if
  // authentication is disabled.
  absl::Status Reload();

  // Whether a call of `rpc`, which needs `required`, may proceed, judged by
  // its "authorization" metadata: the name of its token (the caller, for
  // fair scheduling), or "" when authentication is disabled; Unauthenticated
  // if there is no "Bearer TOKEN" or the token is unknown; PermissionDenied
  // if the token lacks the scope (naming the token, never quoting it).
  absl::StatusOr<std::string> Authorize(const grpc::ServerContextBase& context,
                                        absl::string_view rpc,
                                        Scope required) const;
  // The same, on the values of the "authorization" metadata key.
  absl::StatusOr<std::string> Authorize(
      absl::Span<const absl::string_view> authorization, absl::string_view rpc,
      Scope required) const;

 private:
  explicit Authenticator(std::string token_file)
      : token_file_(std::move(token_file)) {}

  const std::string token_file_;
  mutable absl::Mutex mu_;
  // Replaced whole by Reload; Authorize copies the pointer and reads without
  // the lock.
  std::shared_ptr<const std::vector<TokenEntry>> tokens_ ABSL_GUARDED_BY(mu_);
};

// The client a call counts against for fair scheduling and per-client
// limits: the name of its token (`caller`, from Authorize), so that a
// client cannot gain turns by opening connections; without a token file,
// the peer's address ("ipv4:127.0.0.1:50312"), i.e. one connection.
std::string ClientKey(absl::string_view peer, absl::string_view caller);

}  // namespace bnn::server

#endif  // BNN_SERVER_AUTH_AUTHENTICATOR_H_
