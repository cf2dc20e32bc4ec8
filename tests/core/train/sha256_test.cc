// SHA-256 against the FIPS 180-2 known answers (plus padding-boundary lengths
// whose digests come from Python's hashlib), fed whole and in uneven chunks,
// and resumed from saved states.
#include "train/sha256.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "bnn/io/sha256.h"

namespace bnn {
namespace {

using internal::Sha256;

std::string Hash(const std::string& message) {
  Sha256 sha;
  sha.Update(message);
  return sha.HexDigest();
}

TEST(Sha256Test, FipsEmptyMessage) {
  EXPECT_EQ(Hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, FipsAbc) {
  EXPECT_EQ(Hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, Fips448BitMessage) {
  EXPECT_EQ(Hash("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, Fips896BitMessage) {
  EXPECT_EQ(
      Hash("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
           "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256Test, FipsOneMillionAsInUnevenChunks) {
  const std::string a(1000, 'a');
  // Chunk sizes straddle the 64-byte block in every way.
  const size_t chunks[] = {1, 63, 64, 65, 127, 3, 200, 0, 55, 9};
  Sha256 sha;
  size_t fed = 0;
  for (size_t k = 0; fed < 1000000; ++k) {
    const size_t n = std::min(chunks[k % 10], size_t{1000000} - fed);
    sha.Update(a.data(), n);
    fed += n;
  }
  EXPECT_EQ(sha.HexDigest(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, OneMillionAsInOneCall) {
  EXPECT_EQ(Hash(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, PaddingBoundaries) {
  // Lengths around the 55/56-byte padding limit and the block size.
  const std::pair<size_t, const char*> cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
  };
  for (const auto& [n, digest] : cases) {
    EXPECT_EQ(Hash(std::string(n, 'a')), digest) << n;
  }
}

TEST(Sha256Test, BinaryBytesIncludingZeros) {
  std::vector<uint8_t> bytes(256);
  for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(i);
  Sha256 sha;
  sha.Update(bytes.data(), bytes.size());
  EXPECT_EQ(sha.HexDigest(),
            "40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880");
}

// ---------------------------------------------------------- SaveState

TEST(Sha256Test, ResumesFromASavedStateAtEveryLength) {
  std::string bytes;
  for (int i = 0; i < 200; ++i) bytes.push_back(static_cast<char>(i * 7));
  Sha256 whole;
  whole.Update(bytes);
  const std::string expected = whole.HexDigest();
  for (size_t split = 0; split <= bytes.size(); split += 13) {
    Sha256 first;
    first.Update(bytes.data(), split);
    std::optional<Sha256> resumed = Sha256::LoadState(first.SaveState());
    ASSERT_TRUE(resumed.has_value()) << split;
    resumed->Update(bytes.data() + split, bytes.size() - split);
    EXPECT_EQ(resumed->HexDigest(), expected) << split;
  }
}

TEST(Sha256Test, RejectsStatesItDidNotSave) {
  EXPECT_FALSE(Sha256::LoadState("").has_value());
  Sha256 sha;
  sha.Update("abc");
  std::string state = sha.SaveState();
  state.pop_back();  // the partial block no longer matches the length
  EXPECT_FALSE(Sha256::LoadState(state).has_value());
}

TEST(Sha256Test, PublicHexOfBytesEqualsTheHasher) {
  EXPECT_EQ(Sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string binary("\0\xff\x80 bytes", 9);
  EXPECT_EQ(Sha256Hex(binary), Hash(binary));
}

}  // namespace
}  // namespace bnn
