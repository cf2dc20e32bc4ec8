// SHA-256 (FIPS 180-4), for dataset fingerprints in snapshots.
#ifndef BNN_TRAIN_SHA256_H_
#define BNN_TRAIN_SHA256_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace bnn::internal {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(absl::string_view s) { Update(s.data(), s.size()); }
  // Lower-case hex digest; the object must not be updated afterwards.
  std::string HexDigest();

  // The state after the bytes so far (fixed size), and the hasher that
  // continues from one; nullopt if `state` is not a SaveState().
  std::string SaveState() const;
  static std::optional<Sha256> LoadState(absl::string_view state);

 private:
  void Block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

}  // namespace bnn::internal

#endif  // BNN_TRAIN_SHA256_H_
