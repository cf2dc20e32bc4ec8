#include "server/common/log.h"

#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <absl/strings/str_split.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

using ::bnn::server::testutil::StatusIs;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Makes the default logger write to a string in `format` for the test.
class LogTest : public ::testing::Test {
 protected:
  void Use(LogFormat format) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    std::shared_ptr<spdlog::logger> logger =
        NewLogger("test", format, std::move(sink));
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(std::move(logger));
  }
  void TearDown() override {
    // Back to text for the tests that follow.
    Use(LogFormat::kText);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  }
  std::vector<std::string> Lines() const {
    return absl::StrSplit(out_.str(), '\n', absl::SkipEmpty());
  }

  std::ostringstream out_;
};

TEST(LogOptionsTest, ParsesFormatsAndLevels) {
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_THAT(ParseLogFormat("JSON").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--log-format = 'JSON' must be one of: text, json"));
  EXPECT_EQ(*ParseLogLevel("trace"), spdlog::level::trace);
  EXPECT_EQ(*ParseLogLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(*ParseLogLevel("warning"), spdlog::level::warn);
  EXPECT_EQ(*ParseLogLevel("critical"), spdlog::level::critical);
  EXPECT_THAT(ParseLogLevel("off").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "must be one of: trace, debug, info, warn, error, "
                       "critical"));
}

TEST_F(LogTest, TextAppendsFieldsAsKeyValue) {
  Use(LogFormat::kText);
  Log(spdlog::level::info, "job finished",
      {{"job_id", "job-1"},
       {"steps", 120},
       {"loss", 0.25},
       {"done", true},
       {"error", "bad \"value\" = x"},
       {"empty", ""}});
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0],
              EndsWith("job finished job_id=job-1 steps=120 loss=0.25 "
                       "done=true error=\"bad \\\"value\\\" = x\" "
                       "empty=\"\""));
  EXPECT_THAT(lines[0], HasSubstr("[info]"));
}

TEST_F(LogTest, UserTextCannotForgeLinesOrGrowThem) {
  Use(LogFormat::kText);
  Log(spdlog::level::warn, "upload",
      {{"name", "evil\n[bnn-server] [info] FORGED"},
       {"huge", std::string(100000, 'x')}});
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("evil\\n[bnn-server]"));
  EXPECT_THAT(lines[0], HasSubstr("more bytes]"));
  EXPECT_LT(lines[0].size(), 1000u);
}

TEST_F(LogTest, LevelFilters) {
  Use(LogFormat::kJson);
  spdlog::default_logger()->set_level(spdlog::level::warn);
  Log(spdlog::level::info, "dropped", {{"k", 1}});
  spdlog::info("dropped too");
  spdlog::error("kept");
  EXPECT_EQ(Lines().size(), 1u);
}

TEST_F(LogTest, JsonLinesParseWithTheirFields) {
  Use(LogFormat::kJson);
  spdlog::info("plain message with \"quotes\" and \\ backslash");
  Log(spdlog::level::warn, "job finished",
      {{"job_id", "job-1"},
       {"steps", int64_t{1} << 40},
       {"loss", 1.5},
       {"nan", std::numeric_limits<double>::quiet_NaN()},
       {"ok", false},
       {"name", "tab\there\nnewline \x01 \xff\xfe bytes \xc3\xa9"}});
  const std::vector<std::string> lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    const nlohmann::json json = nlohmann::json::parse(line);
    EXPECT_THAT(
        json["ts"].get<std::string>(),
        MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{6}Z"));
  }
  const nlohmann::json first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["level"], "info");
  EXPECT_EQ(first["msg"], "plain message with \"quotes\" and \\ backslash");
  EXPECT_EQ(first.size(), 3u);

  const nlohmann::json second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["level"], "warning");
  EXPECT_EQ(second["msg"], "job finished");
  EXPECT_EQ(second["job_id"], "job-1");
  EXPECT_EQ(second["steps"], int64_t{1} << 40);
  EXPECT_EQ(second["loss"], 1.5);
  EXPECT_EQ(second["nan"], "NaN");
  EXPECT_EQ(second["ok"], false);
  // SafeText first (control characters as escapes), then JSON; invalid
  // UTF-8 becomes U+FFFD, valid UTF-8 stays.
  EXPECT_EQ(second["name"],
            "tab\\there\\nnewline \\x01 \xef\xbf\xbd\xef\xbf\xbd bytes "
            "\xc3\xa9");
}

TEST(JsonStringTest, EscapesAndReplacesInvalidUtf8) {
  std::string out;
  AppendJsonString("a\"b\\c\n\x7f", &out);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\u007f\"");
  out.clear();
  // Overlong "/", a lone continuation byte, a surrogate, a cut sequence.
  AppendJsonString("\xc0\xaf|\x80|\xed\xa0\x80|\xe2\x82", &out);
  EXPECT_EQ(nlohmann::json::parse(out).get<std::string>(),
            "\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd|"
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd");
  out.clear();
  AppendJsonString("\xf0\x9f\x98\x80", &out);  // U+1F600, four bytes
  EXPECT_EQ(out, "\"\xf0\x9f\x98\x80\"");
}

}  // namespace
}  // namespace bnn::server
