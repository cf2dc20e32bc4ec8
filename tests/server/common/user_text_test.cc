#include "server/common/user_text.h"

#include <string>

#include <gtest/gtest.h>

namespace bnn::server {
namespace {

TEST(SafeTextTest, EscapesControlCharactersAndBackslashes) {
  EXPECT_EQ(SafeText("evil\n[info] forged\r\t\x1b[31m\\ \x7f"),
            "evil\\n[info] forged\\r\\t\\x1b[31m\\\\ \\x7f");
  EXPECT_EQ(SafeText("plain name ü"), "plain name ü");
}

TEST(SafeTextTest, CutsLongTextWithAMarker) {
  const std::string huge(32 << 20, 'a');
  const std::string safe = SafeText(huge);
  EXPECT_EQ(safe, std::string(kMaxUserValueBytes, 'a') + "...[" +
                      std::to_string(huge.size() - kMaxUserValueBytes) +
                      " more bytes]");
  EXPECT_EQ(SafeText("abcdef", 3), "abc...[3 more bytes]");
}

TEST(Utf8PrefixTest, NeverSplitsACodePoint) {
  const std::string text = "ab\xc3\xbc";  // "abü": ü is 2 bytes
  EXPECT_EQ(Utf8Prefix(text, 3), "ab");
  EXPECT_EQ(Utf8Prefix(text, 4), text);
  EXPECT_EQ(Utf8Prefix(text, 10), text);
}

}  // namespace
}  // namespace bnn::server
