#include "server/common/user_text.h"

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

namespace bnn::server {

absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  // Back off over continuation bytes (10xxxxxx) to a code point's start.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) {
    --cut;
  }
  return text.substr(0, cut);
}

std::string SafeText(absl::string_view text, size_t max_bytes) {
  const absl::string_view kept = Utf8Prefix(text, max_bytes);
  std::string out;
  out.reserve(kept.size() + 32);
  for (const char c : kept) {
    const unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += absl::StrFormat("\\x%02x", u);
        } else {
          out.push_back(c);
        }
    }
  }
  if (kept.size() < text.size()) {
    absl::StrAppend(&out, "...[", text.size() - kept.size(), " more bytes]");
  }
  return out;
}

}  // namespace bnn::server
