#include "server/auth/token_file.h"

#include <fstream>
#include <set>
#include <string>

#include <absl/strings/ascii.h>
#include <absl/strings/escaping.h>
#include <absl/strings/str_cat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;

std::string HexOf(const TokenHash& hash) {
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(hash.data()), hash.size()));
}

constexpr char kHashA[] =
    "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr char kHashB[] =
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

// FIPS 180-2 Appendix B.1, and the empty message.
TEST(HashTokenTest, IsSha256OfTheTokenBytes) {
  EXPECT_EQ(HexOf(HashToken("abc")), std::string(kHashA).substr(7));
  EXPECT_EQ(HexOf(HashToken("")), std::string(kHashB).substr(7));
  EXPECT_TRUE(HashesEqual(HashToken("abc"), HashToken("abc")));
  EXPECT_FALSE(HashesEqual(HashToken("abc"), HashToken("abd")));
}

TEST(ParseTokenFileTest, ReadsEntriesSkippingBlankAndCommentLines) {
  const std::string contents = absl::StrCat(
      "# tokens of the test\n\n", kHashA, " predict ci-predict\r\n", "  \t",
      kHashB, "\ttrain,admin   ops@example.org  \n# end");
  const std::vector<TokenEntry> entries =
      *ParseTokenFile(contents, "/etc/bnn/tokens");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_TRUE(HashesEqual(entries[0].hash, HashToken("abc")));
  EXPECT_EQ(entries[0].scopes.ToString(), "predict");
  EXPECT_EQ(entries[0].name, "ci-predict");
  EXPECT_TRUE(HashesEqual(entries[1].hash, HashToken("")));
  EXPECT_EQ(entries[1].scopes.ToString(), "train,admin");
  EXPECT_EQ(entries[1].name, "ops@example.org");
  EXPECT_TRUE(ParseTokenFile("", "empty")->empty());
}

TEST(ParseTokenFileTest, ErrorsNameTheFileAndLine) {
  const std::string good = absl::StrCat(kHashA, " predict a\n");
  struct Case {
    std::string contents;
    std::string message;
  };
  const std::vector<Case> cases = {
      {absl::StrCat(good, kHashB, " predict\n"),
       "token file F line 2: expected 3 fields (sha256:<hex> <scopes> "
       "<name>), found 2"},
      {absl::StrCat("# x\n", kHashB, " predict b extra\n"),
       "line 2: expected 3 fields"},
      {"md5:900150983cd24fb0d6963f7d28e17f72 predict a\n",
       "line 1: the first field must be sha256: and 64 lower-case hex digits"},
      {absl::StrCat("sha256:", absl::AsciiStrToUpper(kHashA + 7),
                    " predict a\n"),
       "line 1: the first field must be sha256:"},
      {absl::StrCat(std::string(kHashA).substr(0, 70), " predict a\n"),
       "line 1: the first field must be sha256:"},
      {absl::StrCat(kHashA, " predict,delete a\n"),
       "line 1: unknown scope 'delete'"},
      {absl::StrCat(kHashA, " , a\n"), "line 1: unknown scope ''"},
      {absl::StrCat(kHashA, " predict a/b\n"),
       "line 1: token name 'a/b' may only hold"},
      {absl::StrCat(kHashA, " predict ", std::string(65, 'n'), "\n"),
       "line 1: token name has 65 characters; it must have 1..64"},
      {absl::StrCat(good, kHashB, " train a\n"),
       "line 2: the name 'a' is used by an earlier line"},
      {absl::StrCat(good, kHashA, " train b\n"),
       "line 2: the hash is used by an earlier line"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParseTokenFile(c.contents, "F").status(),
                StatusIs(absl::StatusCode::kInvalidArgument, c.message))
        << c.contents;
  }
}

// A token pasted into the file instead of its hash is refused without being
// echoed into the error (which ends up in logs).
TEST(ParseTokenFileTest, APastedTokenIsRefusedWithoutQuotingIt) {
  const NewToken created = *CreateToken(*ScopeSet::Parse("admin"), "ops");
  const absl::Status status =
      ParseTokenFile(created.token + " admin ops\n", "F").status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               "line 1: this line holds a token, not its "
                               "hash"));
  EXPECT_THAT(std::string(status.message()), Not(HasSubstr(created.token)));
  const absl::Status garbled =
      ParseTokenFile("sha256:" + created.token + " admin ops\n", "F").status();
  EXPECT_THAT(std::string(garbled.message()), Not(HasSubstr(created.token)));
}

TEST(ReadTokenFileTest, ReadsAFileAndNamesAMissingOne) {
  TempDir dir;
  const std::string path = dir.path() + "/tokens";
  std::ofstream(path) << kHashA << " admin root\n";
  ASSERT_EQ(ReadTokenFile(path)->size(), 1u);
  EXPECT_THAT(ReadTokenFile(dir.path() + "/missing").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       "cannot read token file " + dir.path() + "/missing"));
}

TEST(CreateTokenTest, MakesDistinctRandomTokensWhoseLineParsesBack) {
  const ScopeSet scopes = *ScopeSet::Parse("predict,train");
  std::set<std::string> tokens;
  for (int i = 0; i < 100; ++i) {
    const NewToken created = *CreateToken(scopes, "pipeline");
    // "bnn_" and 256 bits in unpadded base64url.
    EXPECT_THAT(created.token, MatchesRegex("bnn_[A-Za-z0-9_-]{43}"));
    EXPECT_TRUE(tokens.insert(created.token).second);
    EXPECT_TRUE(HashesEqual(created.entry.hash, HashToken(created.token)));
    const std::string line = FormatTokenLine(created.entry);
    EXPECT_EQ(line, "sha256:" + HexOf(created.entry.hash) +
                        " predict,train pipeline");
    const std::vector<TokenEntry> parsed = *ParseTokenFile(line, "F");
    ASSERT_EQ(parsed.size(), 1u);
    EXPECT_TRUE(HashesEqual(parsed[0].hash, created.entry.hash));
    EXPECT_EQ(parsed[0].scopes, scopes);
    EXPECT_EQ(parsed[0].name, "pipeline");
  }
}

TEST(CreateTokenTest, DefaultNameComesFromTheHash) {
  const NewToken created = *CreateToken(*ScopeSet::Parse("predict"), "");
  EXPECT_EQ(created.entry.name,
            "token-" + HexOf(created.entry.hash).substr(0, 8));
}

TEST(CreateTokenTest, RejectsNoScopesAndBadNames) {
  EXPECT_THAT(CreateToken(ScopeSet(), "a").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "a token needs at least one scope"));
  EXPECT_THAT(CreateToken(*ScopeSet::Parse("predict"), "two words").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "token name 'two words' may only hold"));
}

}  // namespace
}  // namespace bnn::server
