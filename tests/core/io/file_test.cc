// Durable file primitives: atomic replacement, whole-file reads, read-only
// mappings that survive replacement and deletion, and idempotent removal.
#include "bnn/io/file.h"

#include <filesystem>
#include <memory>
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

TEST(WriteFileAtomicallyTest, FailedRenameLeavesNoTemporary) {
  testing::ScopedTempDir dir;
  // A non-empty directory cannot be replaced by a file.
  const std::string path = dir.File("taken");
  std::filesystem::create_directories(path + "/inside");
  const absl::Status status = WriteFileAtomically(path, "x");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Msg(status), HasSubstr("cannot rename into place"));
  EXPECT_FALSE(std::filesystem::exists(path + std::string(kTempSuffix)));
}

TEST(FileWriterTest, WritesInPiecesAndCommits) {
  testing::ScopedTempDir dir;
  const std::string temp = dir.File("file.tmp");
  std::unique_ptr<FileWriter> writer = *FileWriter::Create(temp);
  ASSERT_TRUE(writer->Append("hello ").ok());
  ASSERT_TRUE(writer->Append("world").ok());
  ASSERT_TRUE(writer->WriteAt(0, "J").ok());
  EXPECT_EQ(writer->size(), 11u);
  char back[5];
  ASSERT_TRUE(writer->ReadAt(6, 5, back).ok());
  EXPECT_EQ(std::string(back, 5), "world");
  EXPECT_EQ(writer->ReadAt(8, 5, back).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->WriteAt(12, "x").code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(writer->Commit(dir.File("file")).ok());
  EXPECT_EQ(*ReadFile(dir.File("file")), "Jello world");
  EXPECT_FALSE(std::filesystem::exists(temp));
  EXPECT_EQ(writer->Append("more").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(FileWriterTest, DroppedWriterDeletesItsTemporary) {
  testing::ScopedTempDir dir;
  const std::string temp = dir.File("file.tmp");
  {
    std::unique_ptr<FileWriter> writer = *FileWriter::Create(temp);
    ASSERT_TRUE(writer->Append("partial").ok());
    EXPECT_TRUE(std::filesystem::exists(temp));
  }
  EXPECT_FALSE(std::filesystem::exists(temp));
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
