#include "server/store/ids.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace bnn::server {
namespace {

TEST(IdsTest, NewIdsHaveThePrefixAndAreDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewId(kDatasetIdPrefix);
    EXPECT_TRUE(IsId(kDatasetIdPrefix, id)) << id;
    EXPECT_EQ(id.size(), 2 + 1 + 16u);
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_TRUE(IsId(kSnapshotIdPrefix, NewId(kSnapshotIdPrefix)));
}

TEST(IdsTest, IsIdRejectsOtherShapes) {
  EXPECT_TRUE(IsId("job", "job-0123456789abcdef"));
  for (const char* bad :
       {"job-0123456789abcde", "job-0123456789abcdef0", "job_0123456789abcdef",
        "ds-0123456789abcdef", "job-0123456789ABCDEF", "job-0123456789abcdeg",
        "job-../../etc/pass", ""}) {
    EXPECT_FALSE(IsId("job", bad)) << bad;
  }
}

}  // namespace
}  // namespace bnn::server
