#include "client/json_writer.h"

#include <cassert>
#include <cmath>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

namespace bnn::client {
namespace {

// Length of the well-formed UTF-8 sequence starting at text[i], or 0 if it is
// malformed (overlong forms, surrogates and code points above U+10FFFF
// included).
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char min_second = 0x80;
  unsigned char max_second = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) min_second = 0xA0;  // overlong
    if (lead == 0xED) max_second = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) min_second = 0x90;  // overlong
    if (lead == 0xF4) max_second = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < min_second || byte(i + 1) > max_second) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

std::string JsonQuote(absl::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || c == 0x7F) {
            out += absl::StrFormat("\\u%04x", c);
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    const size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      // A JSON text must be valid Unicode; keep going with a visible marker
      // rather than failing the whole output.
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.data() + i, length);
      i += length;
    }
  }
  out.push_back('"');
  return out;
}

std::string JsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  for (int precision = 1; precision < 17; ++precision) {
    std::string s = absl::StrFormat("%.*g", precision, value);
    double back = 0;
    if (absl::SimpleAtod(s, &back) && back == value) return s;
  }
  return absl::StrFormat("%.17g", value);
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    assert(!has_root_ && "JsonWriter: more than one top-level value");
    has_root_ = true;
    return;
  }
  Frame& frame = stack_.back();
  if (frame.scope == Scope::kObject) {
    assert(frame.after_key && "JsonWriter: object value without a key");
    frame.after_key = false;
    return;
  }
  if (!frame.empty) out_.push_back(',');
  frame.empty = false;
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  stack_.push_back({Scope::kObject});
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  assert(!stack_.empty() && stack_.back().scope == Scope::kObject &&
         !stack_.back().after_key && "JsonWriter: unbalanced EndObject");
  stack_.pop_back();
  out_.push_back('}');
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  stack_.push_back({Scope::kArray});
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  assert(!stack_.empty() && stack_.back().scope == Scope::kArray &&
         "JsonWriter: unbalanced EndArray");
  stack_.pop_back();
  out_.push_back(']');
  return *this;
}

JsonWriter& JsonWriter::Key(absl::string_view key) {
  assert(!stack_.empty() && stack_.back().scope == Scope::kObject &&
         !stack_.back().after_key && "JsonWriter: Key outside an object");
  Frame& frame = stack_.back();
  if (!frame.empty) out_.push_back(',');
  frame.empty = false;
  frame.after_key = true;
  out_ += JsonQuote(key);
  out_.push_back(':');
  return *this;
}

JsonWriter& JsonWriter::String(absl::string_view value) {
  BeforeValue();
  out_ += JsonQuote(value);
  return *this;
}

JsonWriter& JsonWriter::Number(double value) {
  BeforeValue();
  out_ += JsonNumber(value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

bool JsonWriter::complete() const { return has_root_ && stack_.empty(); }

}  // namespace bnn::client
