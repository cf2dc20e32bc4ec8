// User-supplied text (dataset names, ids, parameter values, and error
// messages that quote them) on its way into log lines and error messages:
// control characters are escaped, so that no value can forge a log line,
// and long text is cut with a marker saying how much was cut, so that a
// 32 MiB id cannot become a 32 MiB log line.
#ifndef BNN_SERVER_COMMON_USER_TEXT_H_
#define BNN_SERVER_COMMON_USER_TEXT_H_

#include <cstddef>
#include <string>

#include <absl/strings/string_view.h>

namespace bnn::server {

// What a single user-supplied value may take in a message or a log line.
inline constexpr size_t kMaxUserValueBytes = 128;

// The longest prefix of `text` of at most `max_bytes` bytes that does not
// split a UTF-8 code point.
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

// `text` cut to a Utf8Prefix of `max_bytes` followed by "...[N more bytes]"
// when longer, with control characters (C0 and DEL) escaped as \n, \r, \t or
// \xNN and backslashes doubled, so the result is one line that reads back
// unambiguously.
std::string SafeText(absl::string_view text,
                     size_t max_bytes = kMaxUserValueBytes);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_USER_TEXT_H_
