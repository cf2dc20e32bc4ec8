#include "server/store/ids.h"

#include <cstdint>

#include <absl/random/random.h>
#include <absl/strings/ascii.h>
#include <absl/strings/str_format.h>

namespace bnn::server {
namespace {

constexpr size_t kHexDigits = 16;

}  // namespace

std::string NewId(absl::string_view prefix) {
  // absl::BitGen is not thread-safe; one per thread avoids a lock.
  thread_local absl::BitGen gen;
  return absl::StrFormat("%s-%016x", prefix, absl::Uniform<uint64_t>(gen));
}

bool IsId(absl::string_view prefix, absl::string_view id) {
  if (id.size() != prefix.size() + 1 + kHexDigits ||
      id.substr(0, prefix.size()) != prefix || id[prefix.size()] != '-') {
    return false;
  }
  for (const char c : id.substr(prefix.size() + 1)) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

}  // namespace bnn::server
