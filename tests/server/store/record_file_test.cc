#include "server/store/record_file.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::ElementsAre;

constexpr RecordFormat kFormat{"TESTREC1", 2};

TEST(RecordTest, RoundTrip) {
  for (const std::string& payload :
       {std::string(), std::string("hello"), std::string(100000, '\0')}) {
    const std::string bytes = EncodeRecord(kFormat, payload);
    const absl::StatusOr<absl::string_view> decoded =
        DecodeRecord(kFormat, bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, payload);
  }
}

TEST(RecordTest, AcceptsOlderVersions) {
  const std::string bytes = EncodeRecord({"TESTREC1", 1}, "old");
  EXPECT_EQ(*DecodeRecord(kFormat, bytes), "old");
}

TEST(RecordTest, RejectsNewerVersions) {
  const std::string bytes = EncodeRecord({"TESTREC1", 3}, "new");
  EXPECT_THAT(DecodeRecord(kFormat, bytes).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "record format version 3 is newer than this "
                       "server's 2"));
}

TEST(RecordTest, DetectsEveryFlippedPayloadByte) {
  const std::string bytes = EncodeRecord(kFormat, "payload bytes");
  const size_t header = 8 + 4 + 8;
  for (size_t i = header; i < bytes.size(); ++i) {
    std::string corrupt = bytes;
    corrupt[i] ^= 0x01;
    EXPECT_THAT(DecodeRecord(kFormat, corrupt).status(),
                StatusIs(absl::StatusCode::kDataLoss, "checksum mismatch"))
        << "byte " << i;
  }
}

TEST(RecordTest, DetectsTruncationAndWrongMagic) {
  const std::string bytes = EncodeRecord(kFormat, "payload bytes");
  EXPECT_THAT(DecodeRecord(kFormat, bytes.substr(0, bytes.size() - 1)).status(),
              StatusIs(absl::StatusCode::kDataLoss, "truncated or extended"));
  EXPECT_THAT(DecodeRecord(kFormat, bytes + "x").status(),
              StatusIs(absl::StatusCode::kDataLoss, "truncated or extended"));
  EXPECT_THAT(DecodeRecord(kFormat, bytes.substr(0, 10)).status(),
              StatusIs(absl::StatusCode::kDataLoss, "bad magic or too short"));
  EXPECT_THAT(DecodeRecord({"OTHERREC", 2}, bytes).status(),
              StatusIs(absl::StatusCode::kDataLoss, "bad magic"));
}

TEST(WriteFileAtomicallyTest, WritesAndReplaces) {
  TempDir dir;
  const std::string path = dir.path() + "/file";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(*ReadFile(path), "second");
  EXPECT_FALSE(std::filesystem::exists(path + std::string(kTempSuffix)));
}

TEST(WriteFileAtomicallyTest, ReportsUnwritableDirectories) {
  EXPECT_THAT(WriteFileAtomically("/nonexistent/dir/file", "x"),
              StatusIs(absl::StatusCode::kInternal, "cannot create"));
}

TEST(ReadFileTest, MissingFileIsNotFound) {
  TempDir dir;
  EXPECT_THAT(ReadFile(dir.path() + "/missing").status(),
              StatusIs(absl::StatusCode::kNotFound, "does not exist"));
}

TEST(MappedFileTest, MapsTheWholeFile) {
  TempDir dir;
  const std::string path = dir.path() + "/file";
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
  TempDir dir;
  const std::string path = dir.path() + "/empty";
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(MappedFile::Open(path)->bytes(), "");
  EXPECT_THAT(MappedFile::Open(dir.path() + "/missing").status(),
              StatusIs(absl::StatusCode::kNotFound, "does not exist"));
}

TEST(RemoveFileTest, MissingFileIsFine) {
  TempDir dir;
  const std::string path = dir.path() + "/file";
  ASSERT_TRUE(WriteFileAtomically(path, "x").ok());
  EXPECT_TRUE(RemoveFile(path).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(RemoveFile(path).ok());
  EXPECT_THAT(RemoveFile(dir.path()),  // a directory cannot be unlinked
              StatusIs(absl::StatusCode::kInternal, "cannot delete"));
}

TEST(ScanRecordStemsTest, ListsEveryStemWithTheExtension) {
  TempDir dir;
  for (const char* name : {"b.v2.dataset", "a.dataset", "c.dataset.tmp"}) {
    std::ofstream(dir.path() + "/" + name) << "x";
  }
  EXPECT_THAT(*ScanRecordStems(dir.path(), ".dataset"),
              ElementsAre("a", "b.v2"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/c.dataset.tmp"));
}

TEST(ScanRecordDirTest, ListsIdsAndRemovesTemporaries) {
  TempDir dir;
  const std::string root = dir.path() + "/records";  // created by the scan
  ASSERT_TRUE(ScanRecordDir(root, "ds", ".dataset").ok());
  for (const char* name :
       {"ds-00000000000000bb.dataset", "ds-00000000000000aa.dataset",
        "ds-00000000000000cc.dataset.tmp", "ds-00000000000000dd.other",
        "ds-XYZ.dataset", "job-00000000000000aa.dataset", "notes.txt"}) {
    std::ofstream(root + "/" + name) << "x";
  }
  EXPECT_THAT(*ScanRecordDir(root, "ds", ".dataset"),
              ElementsAre("ds-00000000000000aa", "ds-00000000000000bb"));
  EXPECT_FALSE(
      std::filesystem::exists(root + "/ds-00000000000000cc.dataset.tmp"));
  EXPECT_EQ(ReadFileOrEmpty(root + "/notes.txt"), "x");  // others untouched
}

}  // namespace
}  // namespace bnn::server
