#include "server/auth/token_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <set>
#include <sstream>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/escaping.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_split.h>

#include "bnn/check.h"

namespace bnn::server {
namespace {

constexpr absl::string_view kHashPrefix = "sha256:";
constexpr absl::string_view kTokenPrefix = "bnn_";
constexpr size_t kMaxNameLength = 64;
// 256 bits: a hash of a token this long cannot be inverted by search.
constexpr size_t kTokenRandomBytes = 32;

std::string Hex(const TokenHash& hash) {
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(hash.data()), hash.size()));
}

bool IsLowerHex(absl::string_view s) {
  for (const char c : s) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

absl::StatusOr<TokenHash> ParseHash(absl::string_view field) {
  if (!absl::ConsumePrefix(&field, kHashPrefix) || field.size() != 64 ||
      !IsLowerHex(field)) {
    return absl::InvalidArgumentError(
        "the first field must be sha256: and 64 lower-case hex digits");
  }
  const std::string bytes = absl::HexStringToBytes(field);
  TokenHash hash;
  std::memcpy(hash.data(), bytes.data(), hash.size());
  return hash;
}

absl::StatusOr<TokenEntry> ParseLine(absl::string_view line) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
  if (absl::StartsWith(fields[0], kTokenPrefix)) {
    return absl::InvalidArgumentError(
        "this line holds a token, not its hash; the file must hold hashes "
        "only (replace it with the line `bnnctl token create` printed, and "
        "treat the token as leaked)");
  }
  if (fields.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 3 fields (sha256:<hex> <scopes> <name>), found ",
                     fields.size()));
  }
  TokenEntry entry;
  absl::StatusOr<TokenHash> hash = ParseHash(fields[0]);
  if (!hash.ok()) return hash.status();
  entry.hash = *hash;
  absl::StatusOr<ScopeSet> scopes = ScopeSet::Parse(fields[1]);
  if (!scopes.ok()) return scopes.status();
  entry.scopes = *scopes;
  if (absl::Status status = ValidateTokenName(fields[2]); !status.ok()) {
    return status;
  }
  entry.name = std::string(fields[2]);
  return entry;
}

}  // namespace

TokenHash HashToken(absl::string_view token) {
  TokenHash hash;
  unsigned int size = 0;
  // Fails only if OpenSSL cannot allocate or lacks SHA-256.
  BNN_CHECK(EVP_Digest(token.data(), token.size(), hash.data(), &size,
                       EVP_sha256(), nullptr) == 1 &&
            size == hash.size());
  return hash;
}

bool HashesEqual(const TokenHash& a, const TokenHash& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::Status ValidateTokenName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("token name has ",
                                                   name.size(),
                                                   " characters; it must "
                                                   "have 1..",
                                                   kMaxNameLength));
  }
  for (const char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '@' &&
        c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("token name '", absl::CHexEscape(name),
                       "' may only hold A-Z a-z 0-9 . _ @ -"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(
    absl::string_view contents, absl::string_view path) {
  std::vector<TokenEntry> entries;
  std::set<std::string> names;
  std::set<TokenHash> hashes;
  int line_number = 0;
  for (const absl::string_view raw : absl::StrSplit(contents, '\n')) {
    ++line_number;
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || line[0] == '#') continue;
    const auto error = [&](absl::string_view message) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token file ", path, " line ", line_number, ": ", message));
    };
    absl::StatusOr<TokenEntry> entry = ParseLine(line);
    if (!entry.ok()) return error(entry.status().message());
    if (!names.insert(entry->name).second) {
      return error(absl::StrCat("the name '", entry->name,
                                "' is used by an earlier line"));
    }
    if (!hashes.insert(entry->hash).second) {
      return error("the hash is used by an earlier line");
    }
    entries.push_back(*std::move(entry));
  }
  return entries;
}

absl::StatusOr<std::vector<TokenEntry>> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    const std::string message =
        absl::StrCat("cannot read token file ", path, ": ", strerror(error));
    return error == EACCES ? absl::PermissionDeniedError(message)
                           : absl::NotFoundError(message);
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(
        absl::StrCat("error while reading token file ", path));
  }
  return ParseTokenFile(contents.str(), path);
}

std::string FormatTokenLine(const TokenEntry& entry) {
  return absl::StrCat(kHashPrefix, Hex(entry.hash), " ",
                      entry.scopes.ToString(), " ", entry.name);
}

absl::StatusOr<NewToken> CreateToken(const ScopeSet& scopes,
                                     absl::string_view name) {
  if (scopes.empty()) {
    return absl::InvalidArgumentError("a token needs at least one scope");
  }
  if (!name.empty()) {
    if (absl::Status status = ValidateTokenName(name); !status.ok()) {
      return status;
    }
  }
  unsigned char random[kTokenRandomBytes];
  if (RAND_bytes(random, sizeof(random)) != 1) {
    return absl::InternalError("the CSPRNG (OpenSSL RAND_bytes) failed");
  }
  NewToken created;
  created.token =
      absl::StrCat(kTokenPrefix,
                   absl::WebSafeBase64Escape(absl::string_view(
                       reinterpret_cast<const char*>(random), sizeof(random))));
  OPENSSL_cleanse(random, sizeof(random));
  created.entry.hash = HashToken(created.token);
  created.entry.scopes = scopes;
  created.entry.name =
      name.empty()
          ? absl::StrCat("token-", Hex(created.entry.hash).substr(0, 8))
          : std::string(name);
  return created;
}

}  // namespace bnn::server
