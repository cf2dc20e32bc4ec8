#include "bnn/build_info.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <absl/strings/match.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace bnn {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

TEST(FileSha256HexTest, HashesTheFileBytes) {
  const std::string path = ::testing::TempDir() + "/build_info_abc";
  {
    std::ofstream out(path, std::ios::binary);
    out << "abc";
  }
  // FIPS 180-2, appendix B.1.
  EXPECT_EQ(*FileSha256Hex(path),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::remove(path.c_str());
  const absl::StatusOr<std::string> missing = FileSha256Hex(path);
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
}

TEST(RunningBinaryProvenanceTest, NamesThisBinaryItsHashAndItsCommit) {
  const BuildProvenance p = RunningBinaryProvenance();
  ASSERT_EQ(p.error, "");
  EXPECT_TRUE(absl::EndsWith(p.binary_path, "core_build_info_test"))
      << p.binary_path;
  EXPECT_THAT(p.binary_sha256, MatchesRegex("[0-9a-f]{64}"));
  EXPECT_EQ(p.binary_sha256, *FileSha256Hex(p.binary_path));
  const std::string commit = BuildCommit();
  EXPECT_EQ(p.tree_clean,
            commit != "unknown" && !absl::EndsWith(commit, "-dirty"));
  EXPECT_TRUE(absl::StartsWith(commit, p.commit));
  EXPECT_FALSE(absl::EndsWith(p.commit, "-dirty"));
}

}  // namespace
}  // namespace bnn
