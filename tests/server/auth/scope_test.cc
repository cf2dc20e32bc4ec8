#include "server/auth/scope.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;

TEST(ScopeTest, NamesRoundTrip) {
  for (const Scope scope : {Scope::kPredict, Scope::kTrain, Scope::kAdmin}) {
    EXPECT_EQ(*StringToScope(ScopeToString(scope)), scope);
  }
  EXPECT_THAT(StringToScope("Admin").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "unknown scope 'Admin'; scopes are predict, train, "
                       "admin"));
}

TEST(ScopeSetTest, ParsesListsAndPrintsThemInOneOrder) {
  const ScopeSet set = *ScopeSet::Parse("train,predict");
  EXPECT_TRUE(set.Contains(Scope::kPredict));
  EXPECT_TRUE(set.Contains(Scope::kTrain));
  EXPECT_FALSE(set.Contains(Scope::kAdmin));
  EXPECT_EQ(set.ToString(), "predict,train");
  EXPECT_EQ(*ScopeSet::Parse("predict,train"), set);
}

TEST(ScopeSetTest, RejectsEmptyUnknownAndRepeatedEntries) {
  EXPECT_THAT(ScopeSet::Parse("").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "no scopes"));
  EXPECT_THAT(ScopeSet::Parse("predict,").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown scope ''"));
  EXPECT_THAT(
      ScopeSet::Parse("predict,write").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "unknown scope 'write'"));
  EXPECT_THAT(
      ScopeSet::Parse("train,train").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, "'train' is listed twice"));
}

// admin grants everything; predict and train grant only themselves.
TEST(ScopeSetTest, AdminGrantsEveryScopeOthersOnlyTheirOwn) {
  const ScopeSet predict = *ScopeSet::Parse("predict");
  const ScopeSet train = *ScopeSet::Parse("train");
  const ScopeSet both = *ScopeSet::Parse("predict,train");
  const ScopeSet admin = *ScopeSet::Parse("admin");
  EXPECT_TRUE(predict.Grants(Scope::kPredict));
  EXPECT_FALSE(predict.Grants(Scope::kTrain));
  EXPECT_FALSE(predict.Grants(Scope::kAdmin));
  EXPECT_FALSE(train.Grants(Scope::kPredict));
  EXPECT_TRUE(train.Grants(Scope::kTrain));
  EXPECT_FALSE(train.Grants(Scope::kAdmin));
  EXPECT_TRUE(both.Grants(Scope::kPredict));
  EXPECT_TRUE(both.Grants(Scope::kTrain));
  EXPECT_FALSE(both.Grants(Scope::kAdmin));
  for (const Scope scope : {Scope::kPredict, Scope::kTrain, Scope::kAdmin}) {
    EXPECT_TRUE(admin.Grants(scope));
    EXPECT_FALSE(ScopeSet().Grants(scope));
  }
}

}  // namespace
}  // namespace bnn::server
