// Durable file primitives: atomic replacement, whole-file reads, read-only
// mappings that survive replacement and deletion, and idempotent removal.
#include "bnn/io/file.h"

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util/test_util.h"

namespace bnn {
namespace {

using ::bnn::testing::Msg;
using ::testing::HasSubstr;

TEST(WriteFileAtomicallyTest, WritesAndReplaces) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("file");
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(*ReadFile(path), "second");
  EXPECT_FALSE(std::filesystem::exists(path + std::string(kTempSuffix)));
}

TEST(WriteFileAtomicallyTest, ReportsUnwritableDirectories) {
  const absl::Status status = WriteFileAtomically("/nonexistent/dir/file", "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Msg(status), HasSubstr("cannot create"));
}

TEST(ReadFileTest, MissingFileIsNotFound) {
  testing::ScopedTempDir dir;
  const absl::Status status = ReadFile(dir.File("missing")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(status), HasSubstr("missing does not exist"));
}

TEST(MappedFileTest, MapsTheWholeFile) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("file");
  const std::string contents(100000, 'z');
  ASSERT_TRUE(WriteFileAtomically(path, contents).ok());
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  // Replacing and deleting the file leaves the mapping as it was.
  ASSERT_TRUE(WriteFileAtomically(path, "other").ok());
  ASSERT_TRUE(RemoveFile(path).ok());
  MappedFile moved = *std::move(mapped);
  EXPECT_EQ(moved.bytes(), contents);
}

TEST(MappedFileTest, EmptyAndMissingFiles) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("empty");
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(MappedFile::Open(path)->bytes(), "");
  EXPECT_EQ(MappedFile::Open(dir.File("missing")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RemoveFileTest, MissingFileIsFine) {
  testing::ScopedTempDir dir;
  const std::string path = dir.File("file");
  ASSERT_TRUE(WriteFileAtomically(path, "x").ok());
  EXPECT_TRUE(RemoveFile(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(RemoveFile(path).ok());
  // A directory cannot be unlinked.
  const absl::Status status = RemoveFile(dir.path());
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Msg(status), HasSubstr("cannot delete"));
}

TEST(SyncDirectoryTest, MissingDirectoryIsAnError) {
  testing::ScopedTempDir dir;
  EXPECT_TRUE(SyncDirectory(dir.path()).ok());
  EXPECT_FALSE(SyncDirectory(dir.File("absent")).ok());
}

}  // namespace
}  // namespace bnn
