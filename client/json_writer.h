// A small streaming JSON writer for bnnctl's --json output. It always emits
// valid JSON: strings are escaped (control characters as \uXXXX, invalid
// UTF-8 replaced by U+FFFD) and non-finite numbers, which JSON cannot
// represent, become null.
#ifndef BNN_CLIENT_JSON_WRITER_H_
#define BNN_CLIENT_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include <absl/strings/string_view.h>

namespace bnn::client {

// Returns `text` as a quoted JSON string literal.
std::string JsonQuote(absl::string_view text);

// Shortest decimal form that parses back to the same double; "null" for NaN
// and infinities.
std::string JsonNumber(double value);

// Builds one JSON value into a string. Calls must nest correctly (every value
// inside an object is preceded by Key()); misuse is a programming error and is
// caught by assertions in debug builds. Not thread-safe.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(absl::string_view key);

  JsonWriter& String(absl::string_view value);
  JsonWriter& Number(double value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();

  // Shorthands for Key(key) followed by the value.
  JsonWriter& Field(absl::string_view key, absl::string_view value) {
    return Key(key).String(value);
  }
  JsonWriter& Field(absl::string_view key, const char* value) {
    return Key(key).String(value);
  }
  JsonWriter& Field(absl::string_view key, double value) {
    return Key(key).Number(value);
  }
  JsonWriter& Field(absl::string_view key, int64_t value) {
    return Key(key).Int(value);
  }
  JsonWriter& Field(absl::string_view key, int32_t value) {
    return Key(key).Int(value);
  }
  JsonWriter& Field(absl::string_view key, uint64_t value) {
    return Key(key).Uint(value);
  }
  JsonWriter& Field(absl::string_view key, bool value) {
    return Key(key).Bool(value);
  }

  // True once exactly one complete top-level value has been written.
  bool complete() const;
  // The text written so far.
  const std::string& str() const { return out_; }

 private:
  enum class Scope { kObject, kArray };
  struct Frame {
    Scope scope;
    bool empty = true;
    // Inside an object: a key was written and its value is pending.
    bool after_key = false;
  };

  // Writes the separator a new value needs and checks that a value is
  // allowed here.
  void BeforeValue();

  std::string out_;
  std::vector<Frame> stack_;
  bool has_root_ = false;
};

}  // namespace bnn::client

#endif  // BNN_CLIENT_JSON_WRITER_H_
