#include "bench/accuracy/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util/test_util.h"

namespace bnn::experiment {
namespace {

using ::bnn::testing::Msg;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

FlagSet Flags() {
  FlagSet flags;
  flags.Flag("method", "m")
      .Flag("splits", "k", "0")
      .RepeatableFlag("param", "p");
  return flags;
}

TEST(FlagsTest, ParsesBothFormsDefaultsAndRepeats) {
  FlagSet flags = Flags();
  ASSERT_TRUE(
      flags
          .Parse({"--method", "slang", "--param=rank=2", "--param", "epochs=3"})
          .ok());
  EXPECT_EQ(flags.Get("method"), "slang");
  EXPECT_THAT(flags.GetAll("param"), ElementsAre("rank=2", "epochs=3"));
  EXPECT_FALSE(flags.Has("splits"));
  EXPECT_EQ(*flags.GetInt("splits", 0, 10), 0);
}

TEST(FlagsTest, RejectsWhatItDoesNotKnow) {
  FlagSet flags = Flags();
  absl::Status s = flags.Parse({"--metod", "slang"});
  EXPECT_THAT(Msg(s), HasSubstr("unknown flag '--metod'"));
  EXPECT_THAT(Msg(s), HasSubstr("--method"));
  EXPECT_THAT(Msg(Flags().Parse({"slang"})), HasSubstr("unexpected argument"));
  EXPECT_THAT(Msg(Flags().Parse({"--method"})), HasSubstr("needs a value"));
  EXPECT_THAT(Msg(Flags().Parse({"--method", "a", "--method", "b"})),
              HasSubstr("more than once"));
}

TEST(FlagsTest, TypedGettersNameTheFlag) {
  FlagSet flags = Flags();
  ASSERT_TRUE(flags.Parse({"--splits", "x"}).ok());
  EXPECT_THAT(Msg(flags.GetInt("splits", 0, 10).status()),
              HasSubstr("--splits = 'x'"));
  EXPECT_THAT(Msg(flags.GetRequired("method").status()),
              HasSubstr("--method is required"));
}

}  // namespace
}  // namespace bnn::experiment
