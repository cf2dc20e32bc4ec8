// Shared by the fuzz targets (tests/fuzz/*_fuzz.cc): reading a fuzz input
// front to back, and invariant checks. A failed check aborts, which
// libFuzzer and the standalone driver (standalone_main.cc) both report as a
// crash together with the input that caused it.
#ifndef BNN_TESTS_FUZZ_FUZZ_UTIL_H_
#define BNN_TESTS_FUZZ_FUZZ_UTIL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#include "bnn/check.h"
#include "bnn/io/record.h"

// The libFuzzer entry point every target defines.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace bnn::fuzz {

// Consumes a fuzz input from the front; reads past the end give zeros and
// empty strings, so every input is usable.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size)
      : rest_(reinterpret_cast<const char*>(data), size) {}

  uint8_t Byte() {
    if (rest_.empty()) return 0;
    const uint8_t b = static_cast<uint8_t>(rest_[0]);
    rest_.remove_prefix(1);
    return b;
  }

  // A little-endian 16-bit length.
  uint16_t Uint16() {
    const uint16_t low = Byte();
    return static_cast<uint16_t>(low | (uint16_t{Byte()} << 8));
  }

  // The next `n` bytes, or fewer at the end.
  absl::string_view Take(size_t n) {
    const absl::string_view taken = rest_.substr(0, std::min(n, rest_.size()));
    rest_.remove_prefix(taken.size());
    return taken;
  }

  absl::string_view Rest() { return Take(rest_.size()); }

 private:
  absl::string_view rest_;
};

// A status returned for a fuzz input: OK, or an error whose code is one of
// `allowed` and whose message says something (every bad input gets a
// message naming what is wrong). `what` names the call in the report.
inline void CheckStatus(const absl::Status& status,
                        std::initializer_list<absl::StatusCode> allowed,
                        absl::string_view what) {
  if (status.ok()) return;
  if (status.message().empty()) {
    internal::CheckFailed(__FILE__, __LINE__, "error message is not empty",
                          absl::StrCat(what, ": ", status.ToString()));
  }
  if (std::find(allowed.begin(), allowed.end(), status.code()) ==
      allowed.end()) {
    internal::CheckFailed(__FILE__, __LINE__, "status code is expected",
                          absl::StrCat(what, ": ", status.ToString()));
  }
}

// Makes `bytes`, if long enough to hold a record frame (bnn/io/record.h),
// declare its true payload size and end in the payload's CRC32C, so that
// mutations of the payload get past the frame's checks to the decoding
// behind them. The magic and the version are left as they are.
inline void RepairRecordFrame(std::string* bytes) {
  constexpr size_t kFrame = kRecordHeaderBytes + kRecordTrailerBytes;
  if (bytes->size() < kFrame) return;
  const uint64_t payload_size = bytes->size() - kFrame;
  for (int i = 0; i < 8; ++i) {
    (*bytes)[12 + i] = static_cast<char>(payload_size >> (8 * i));
  }
  const uint32_t crc = Crc32c(
      absl::string_view(*bytes).substr(kRecordHeaderBytes, payload_size));
  for (int i = 0; i < 4; ++i) {
    (*bytes)[bytes->size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  }
}

}  // namespace bnn::fuzz

#endif  // BNN_TESTS_FUZZ_FUZZ_UTIL_H_
