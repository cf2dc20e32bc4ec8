#include "server/store/record_dir.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::TempDir;
using ::testing::ElementsAre;

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
