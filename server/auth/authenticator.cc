#include "server/auth/authenticator.h"

#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>

#include "bnn/status.h"

namespace bnn::server {
namespace {

constexpr absl::string_view kBearer = "bearer ";

// How to send a token, for the messages of missing or malformed ones.
constexpr absl::string_view kHowTo =
    "send the metadata 'authorization: Bearer TOKEN' (bnnctl --token or "
    "BNN_TOKEN)";

}  // namespace

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Create(
    std::string token_file) {
  std::unique_ptr<Authenticator> auth(new Authenticator(std::move(token_file)));
  if (auth->enabled()) BNN_RETURN_IF_ERROR(auth->Reload());
  return auth;
}

int Authenticator::num_tokens() const {
  absl::MutexLock lock(&mu_);
  return tokens_ == nullptr ? 0 : static_cast<int>(tokens_->size());
}

absl::Status Authenticator::Reload() {
  if (!enabled()) {
    return absl::FailedPreconditionError(
        "no --token-file is given; there are no tokens to reload");
  }
  BNN_ASSIGN_OR_RETURN(std::vector<TokenEntry> tokens,
                       ReadTokenFile(token_file_));
  auto loaded =
      std::make_shared<const std::vector<TokenEntry>>(std::move(tokens));
  absl::MutexLock lock(&mu_);
  tokens_ = std::move(loaded);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Authenticator::Authorize(
    const grpc::ServerContextBase& context, absl::string_view rpc,
    Scope required) const {
  if (!enabled()) return std::string();
  std::vector<absl::string_view> values;
  const auto [begin, end] =
      context.client_metadata().equal_range("authorization");
  for (auto it = begin; it != end; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  return Authorize(values, rpc, required);
}

absl::StatusOr<std::string> Authenticator::Authorize(
    absl::Span<const absl::string_view> authorization, absl::string_view rpc,
    Scope required) const {
  if (!enabled()) return std::string();
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat(rpc, " needs a bearer token: ", kHowTo));
  }
  absl::string_view token = authorization[0];
  // RFC 6750 section 2.1; the scheme is case-insensitive (RFC 7235 2.1).
  if (authorization.size() != 1 || token.size() < kBearer.size() ||
      !absl::EqualsIgnoreCase(token.substr(0, kBearer.size()), kBearer)) {
    return absl::UnauthenticatedError(
        absl::StrCat("the authorization metadata of ", rpc,
                     " is not one 'Bearer TOKEN': ", kHowTo));
  }
  token = absl::StripAsciiWhitespace(token.substr(kBearer.size()));
  const TokenHash hash = HashToken(token);
  std::shared_ptr<const std::vector<TokenEntry>> tokens;
  {
    absl::MutexLock lock(&mu_);
    tokens = tokens_;
  }
  // Every entry is compared, in constant time each, so the time taken does
  // not depend on which stored hash (if any) matches.
  const TokenEntry* match = nullptr;
  for (const TokenEntry& entry : *tokens) {
    if (HashesEqual(hash, entry.hash)) match = &entry;
  }
  if (match == nullptr) {
    return absl::UnauthenticatedError(
        absl::StrCat("the bearer token of ", rpc, " is not valid"));
  }
  if (!match->scopes.Grants(required)) {
    return absl::PermissionDeniedError(
        absl::StrCat("token '", match->name, "' (scopes ",
                     match->scopes.ToString(), ") may not call ", rpc,
                     ", which needs scope ", ScopeToString(required)));
  }
  return match->name;
}

std::string ClientKey(absl::string_view peer, absl::string_view caller) {
  return caller.empty() ? std::string(peer) : absl::StrCat("token ", caller);
}

}  // namespace bnn::server
