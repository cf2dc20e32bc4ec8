// The token file of --token-file, and new tokens (bnnctl token create).
//
// The file holds hashes only, one token per line:
//
//   sha256:<64 lower-case hex digits> <scopes> <name>
//
// the SHA-256 of the token's exact bytes, a comma-separated list of scopes
// (predict, train, admin; see scope.h) and a name (1..64 of A-Z a-z 0-9 . _
// @ -) that identifies the token in logs and in PERMISSION_DENIED messages.
// Fields are separated by spaces or tabs; blank lines and lines starting with
// '#' are ignored. Names and hashes are unique within a file. A token is
// "bnn_" followed by 43 base64url characters: 256 bits from the operating
// system's CSPRNG (OpenSSL RAND_bytes), so a plain, unsalted hash cannot be
// inverted by guessing.
//
// This library (bnn_tokens) has no gRPC dependency: bnnctl links it to
// write the lines the server reads, so the format has one implementation.
#ifndef BNN_SERVER_AUTH_TOKEN_FILE_H_
#define BNN_SERVER_AUTH_TOKEN_FILE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

#include "server/auth/scope.h"

namespace bnn::server {

using TokenHash = std::array<uint8_t, 32>;

// One line of the token file.
struct TokenEntry {
  TokenHash hash{};
  ScopeSet scopes;
  std::string name;
};

// SHA-256 of the token's bytes.
TokenHash HashToken(absl::string_view token);

// Whether two hashes are equal, in time independent of where they differ
// (CRYPTO_memcmp), so that response times do not reveal a stored hash.
bool HashesEqual(const TokenHash& a, const TokenHash& b);

// InvalidArgument unless `name` is 1..64 of A-Z a-z 0-9 . _ @ -.
absl::Status ValidateTokenName(absl::string_view name);

// Parses the contents of a token file. Errors are InvalidArgument naming
// `path` and the line number; they never quote a hash field, which might be
// a token pasted by mistake.
absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(
    absl::string_view contents, absl::string_view path);
// Reads and parses the file at `path` (NotFound / PermissionDenied naming it
// if it cannot be read).
absl::StatusOr<std::vector<TokenEntry>> ReadTokenFile(const std::string& path);

// The line of `entry` in the token file, without a newline.
std::string FormatTokenLine(const TokenEntry& entry);

struct NewToken {
  // The secret, to be shown once and never stored.
  std::string token;
  // Its line for the token file.
  TokenEntry entry;
};
// A new random token with `scopes` (not empty) and `name`; an empty name
// becomes "token-" and the first 8 hex digits of the hash. Internal if the
// CSPRNG fails.
absl::StatusOr<NewToken> CreateToken(const ScopeSet& scopes,
                                     absl::string_view name);

}  // namespace bnn::server

#endif  // BNN_SERVER_AUTH_TOKEN_FILE_H_
