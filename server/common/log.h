// bnn-server's log: spdlog's default logger, writing one line per event to
// stderr as text or as JSON (--log-format) from a level on (--log-level).
//
// Plain spdlog::info(...) calls log a message. Log() adds structured fields:
// in text they follow the message as key=value, in JSON they are members of
// the line's object beside "ts", "level" and "msg". String fields pass
// through SafeText (user_text.h), so client-chosen text can neither forge a
// line nor make one huge, in either format.
#ifndef BNN_SERVER_COMMON_LOG_H_
#define BNN_SERVER_COMMON_LOG_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <spdlog/common.h>
#include <spdlog/formatter.h>
#include <spdlog/logger.h>

#include "server/common/user_text.h"

namespace bnn::server {

enum class LogFormat { kText, kJson };

// "text" or "json"; InvalidArgument naming the choices otherwise.
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);
// "trace", "debug", "info", "warn" (or "warning"), "error", "critical";
// InvalidArgument naming the choices otherwise.
absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name);

// Makes the default logger write to stderr in `format` from `level` on.
// Call once, before other threads log (bnn-server's main does).
void ConfigureLogging(LogFormat format, spdlog::level::level_enum level);

// A logger named `name` writing to `sink` in `format`, and making Log()
// render fields for that format (for tests; ConfigureLogging uses it).
std::shared_ptr<spdlog::logger> NewLogger(const std::string& name,
                                          LogFormat format,
                                          spdlog::sink_ptr sink);

// One structured field of a Log() line. Keys are code's (lower_snake_case,
// not "ts", "level" or "msg"); values are strings, numbers or booleans.
class LogField {
 public:
  // Text: SafeText(value, max_bytes).
  LogField(absl::string_view key, absl::string_view value,
           size_t max_bytes = kMaxUserValueBytes);
  LogField(absl::string_view key, const char* value)
      : LogField(key, absl::string_view(value)) {}
  LogField(absl::string_view key, const std::string& value)
      : LogField(key, absl::string_view(value)) {}
  template <typename Integer,
            std::enable_if_t<std::is_integral_v<Integer> &&
                                 !std::is_same_v<Integer, bool>,
                             int> = 0>
  LogField(absl::string_view key, Integer value)
      : LogField(key, static_cast<int64_t>(value), Kind::kNumber) {}
  LogField(absl::string_view key, double value);
  LogField(absl::string_view key, bool value);

  absl::string_view key() const { return key_; }

  // Appends " key=value" (text; quoted if the value has a space, '"' or
  // '=', or is empty) or ,"key":value (JSON) to `out`.
  void AppendText(std::string* out) const;
  void AppendJson(std::string* out) const;

 private:
  enum class Kind { kString, kNumber, kBool };
  LogField(absl::string_view key, int64_t value, Kind kind);

  absl::string_view key_;
  Kind kind_;
  // SafeText for strings; the literal for numbers and booleans.
  std::string value_;
};

// Logs `message` with `fields` through the default logger.
void Log(spdlog::level::level_enum level, absl::string_view message,
         std::initializer_list<LogField> fields);

// Appends `text` as a JSON string (quoted; '"', '\\' and control characters
// escaped, invalid UTF-8 replaced by U+FFFD) to `out`.
void AppendJsonString(absl::string_view text, std::string* out);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_LOG_H_
