#include "server/common/log.h"

#include <atomic>
#include <cmath>
#include <utility>

#include <absl/strings/ascii.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/time/time.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "bnn/format.h"

namespace bnn::server {
namespace {

// The format Log() renders fields for: set by NewLogger.
std::atomic<LogFormat> g_format{LogFormat::kText};
// The fields of the Log() call running on this thread, for JsonFormatter
// (spdlog's synchronous loggers format on the calling thread).
thread_local const std::initializer_list<LogField>* t_fields = nullptr;

// {"ts":"2024-05-01T12:00:00.123456Z","level":"info","msg":"...",fields}
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg,
              spdlog::memory_buf_t& dest) override {
    std::string line = "{\"ts\":\"";
    line += absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromChrono(msg.time),
                             absl::UTCTimeZone());
    line += "\",\"level\":\"";
    const spdlog::string_view_t level =
        spdlog::level::to_string_view(msg.level);
    line.append(level.data(), level.size());
    line += "\",\"msg\":";
    AppendJsonString(absl::string_view(msg.payload.data(), msg.payload.size()),
                     &line);
    if (t_fields != nullptr) {
      for (const LogField& field : *t_fields) field.AppendJson(&line);
    }
    line += "}\n";
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

// The length of the valid UTF-8 sequence at the start of `text` (1 to 4),
// or 0 if it does not start with one.
size_t Utf8SequenceLength(absl::string_view text) {
  const auto byte = [&text](size_t i) {
    return static_cast<unsigned char>(text[i]);
  };
  const unsigned char lead = byte(0);
  size_t length = 0;
  uint32_t min = 0;
  uint32_t code = 0;
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, min = 0x80, code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min = 0x800, code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min = 0x10000, code = lead & 0x07;
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF.
  if (code < min || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) {
    return 0;
  }
  return length;
}

}  // namespace

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "--log-format = '", SafeText(name), "' must be one of: text, json"));
}

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(
    absl::string_view name) {
  using spdlog::level::level_enum;
  static constexpr std::pair<absl::string_view, level_enum> kLevels[] = {
      {"trace", level_enum::trace},      {"debug", level_enum::debug},
      {"info", level_enum::info},        {"warn", level_enum::warn},
      {"warning", level_enum::warn},     {"error", level_enum::err},
      {"critical", level_enum::critical}};
  for (const auto& [level_name, level] : kLevels) {
    if (name == level_name) return level;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--log-level = '", SafeText(name),
                   "' must be one of: trace, debug, info, warn, error, "
                   "critical"));
}

std::shared_ptr<spdlog::logger> NewLogger(const std::string& name,
                                          LogFormat format,
                                          spdlog::sink_ptr sink) {
  auto logger = std::make_shared<spdlog::logger>(name, std::move(sink));
  if (format == LogFormat::kJson) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  }
  g_format = format;
  return logger;
}

void ConfigureLogging(LogFormat format, spdlog::level::level_enum level) {
  spdlog::sink_ptr sink;
  if (format == LogFormat::kJson) {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  }
  std::shared_ptr<spdlog::logger> logger =
      NewLogger("bnn-server", format, std::move(sink));
  logger->set_level(level);
  spdlog::set_default_logger(std::move(logger));
}

LogField::LogField(absl::string_view key, absl::string_view value,
                   size_t max_bytes)
    : key_(key), kind_(Kind::kString), value_(SafeText(value, max_bytes)) {}

LogField::LogField(absl::string_view key, int64_t value, Kind kind)
    : key_(key), kind_(kind), value_(absl::StrCat(value)) {}

LogField::LogField(absl::string_view key, double value)
    : key_(key), kind_(Kind::kNumber) {
  if (std::isfinite(value)) {
    value_ = ShortestDouble(value);
  } else {
    // JSON has no NaN or infinities.
    kind_ = Kind::kString;
    value_ = std::isnan(value) ? "NaN" : (value > 0 ? "+Inf" : "-Inf");
  }
}

LogField::LogField(absl::string_view key, bool value)
    : key_(key), kind_(Kind::kBool), value_(value ? "true" : "false") {}

void LogField::AppendText(std::string* out) const {
  absl::StrAppend(out, " ", key_, "=");
  const bool quote =
      kind_ == Kind::kString &&
      (value_.empty() || value_.find_first_of(" \"=") != std::string::npos);
  if (!quote) {
    out->append(value_);
    return;
  }
  out->push_back('"');
  for (const char c : value_) {
    if (c == '"') out->push_back('\\');
    out->push_back(c);
  }
  out->push_back('"');
}

void LogField::AppendJson(std::string* out) const {
  out->push_back(',');
  AppendJsonString(key_, out);
  out->push_back(':');
  if (kind_ == Kind::kString) {
    AppendJsonString(value_, out);
  } else {
    out->append(value_);
  }
}

void Log(spdlog::level::level_enum level, absl::string_view message,
         std::initializer_list<LogField> fields) {
  spdlog::logger* logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;
  if (g_format == LogFormat::kJson) {
    t_fields = &fields;
    logger->log(level, spdlog::string_view_t(message.data(), message.size()));
    t_fields = nullptr;
    return;
  }
  std::string line(message);
  for (const LogField& field : fields) field.AppendText(&line);
  logger->log(level, spdlog::string_view_t(line.data(), line.size()));
}

void AppendJsonString(absl::string_view text, std::string* out) {
  out->push_back('"');
  while (!text.empty()) {
    const unsigned char c = static_cast<unsigned char>(text[0]);
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      out->append("\\ufffd");
      text.remove_prefix(1);
      continue;
    }
    if (length > 1) {
      out->append(text.data(), length);
    } else if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(out, "\\u%04x", c);
    } else {
      out->push_back(static_cast<char>(c));
    }
    text.remove_prefix(length);
  }
  out->push_back('"');
}

}  // namespace bnn::server
