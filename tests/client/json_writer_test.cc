#include "client/json_writer.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include <gtest/gtest.h>

namespace bnn::client {
namespace {

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(JsonQuote("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f\x7f", 3)),
            R"("\u0001\u001f\u007f")");
  EXPECT_EQ(JsonQuote(std::string("nul\0byte", 8)), R"("nul\u0000byte")");
  // '/' needs no escape.
  EXPECT_EQ(JsonQuote("a/b"), "\"a/b\"");
}

TEST(JsonQuoteTest, KeepsValidUtf8) {
  const std::string text = "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9D\x84\x9E";
  EXPECT_EQ(JsonQuote(text), "\"" + text + "\"");
}

TEST(JsonQuoteTest, ReplacesEachMalformedUtf8ByteWithReplacementCharacter) {
  const std::string kReplacement = "\xEF\xBF\xBD";
  // Stray continuation byte, invalid lead byte.
  EXPECT_EQ(JsonQuote("a\x80z"), "\"a" + kReplacement + "z\"");
  EXPECT_EQ(JsonQuote("\xFF"), "\"" + kReplacement + "\"");
  // Overlong encoding of '/'.
  EXPECT_EQ(JsonQuote("\xC0\xAF"), "\"" + kReplacement + kReplacement + "\"");
  // UTF-16 surrogate U+D800.
  EXPECT_EQ(JsonQuote("\xED\xA0\x80"),
            "\"" + kReplacement + kReplacement + kReplacement + "\"");
  // Truncated three-byte sequence at the end.
  EXPECT_EQ(JsonQuote("\xE2\x82"), "\"" + kReplacement + kReplacement + "\"");
  // Above U+10FFFF.
  EXPECT_EQ(JsonQuote("\xF4\x90\x80\x80").substr(1, 3), kReplacement);
}

TEST(JsonQuoteTest, EveryByteRoundTripsThroughARealParser) {
  std::string all;
  for (int c = 0; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  const nlohmann::json parsed = nlohmann::json::parse(JsonQuote(all));
  EXPECT_EQ(parsed.get<std::string>(), all);
}

TEST(JsonNumberTest, NonFiniteValuesAreNull) {
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(JsonNumber(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(JsonNumber(-std::numeric_limits<double>::infinity()), "null");
}

TEST(JsonNumberTest, ShortestFormThatRoundTrips) {
  EXPECT_EQ(JsonNumber(1.0), "1");
  EXPECT_EQ(JsonNumber(-0.5), "-0.5");
  EXPECT_EQ(JsonNumber(0.1), "0.1");
  EXPECT_EQ(JsonNumber(1e300), "1e+300");
  for (double value : {1.0 / 3.0, -2.0 / 7.0, 123456789.123456789,
                       6.02214076e23, std::numeric_limits<double>::denorm_min(),
                       std::numeric_limits<double>::max(),
                       std::numeric_limits<double>::lowest()}) {
    const std::string text = JsonNumber(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
    EXPECT_EQ(nlohmann::json::parse(text).get<double>(), value) << text;
  }
}

TEST(JsonWriterTest, WritesEmptyContainers) {
  JsonWriter object;
  object.BeginObject().EndObject();
  EXPECT_EQ(object.str(), "{}");
  JsonWriter array;
  array.BeginArray().EndArray();
  EXPECT_EQ(array.str(), "[]");
}

TEST(JsonWriterTest, SeparatesMembersAndElements) {
  JsonWriter json;
  json.BeginObject()
      .Field("a", int64_t{1})
      .Key("b")
      .BeginArray()
      .Int(1)
      .Null()
      .Bool(true)
      .BeginObject()
      .EndObject()
      .EndArray()
      .Field("c", "x")
      .EndObject();
  EXPECT_EQ(json.str(), R"({"a":1,"b":[1,null,true,{}],"c":"x"})");
}

TEST(JsonWriterTest, NanInsideArraysAndObjectsIsNull) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  JsonWriter json;
  json.BeginObject().Field("std", nan).Key("values").BeginArray();
  json.Number(1.5).Number(nan).Number(-std::numeric_limits<double>::infinity());
  json.EndArray().EndObject();
  EXPECT_EQ(json.str(), R"({"std":null,"values":[1.5,null,null]})");
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  EXPECT_TRUE(parsed["std"].is_null());
  EXPECT_EQ(parsed["values"][0].get<double>(), 1.5);
}

TEST(JsonWriterTest, IntegerExtremesAreExact) {
  JsonWriter json;
  json.BeginArray()
      .Int(std::numeric_limits<int64_t>::min())
      .Int(std::numeric_limits<int64_t>::max())
      .Uint(std::numeric_limits<uint64_t>::max())
      .EndArray();
  EXPECT_EQ(json.str(),
            "[-9223372036854775808,9223372036854775807,"
            "18446744073709551615]");
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  EXPECT_EQ(parsed[2].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
}

TEST(JsonWriterTest, KeysAreEscaped) {
  JsonWriter json;
  json.BeginObject().Field("we\"ird\nkey", true).EndObject();
  const nlohmann::json parsed = nlohmann::json::parse(json.str());
  EXPECT_TRUE(parsed["we\"ird\nkey"].get<bool>());
}

TEST(JsonWriterTest, CompleteOnlyAfterTheTopLevelValueCloses) {
  JsonWriter json;
  EXPECT_FALSE(json.complete());
  json.BeginObject().Key("a").BeginArray();
  EXPECT_FALSE(json.complete());
  json.EndArray();
  EXPECT_FALSE(json.complete());
  json.EndObject();
  EXPECT_TRUE(json.complete());

  JsonWriter scalar;
  scalar.String("s");
  EXPECT_TRUE(scalar.complete());
  EXPECT_EQ(scalar.str(), "\"s\"");
}

}  // namespace
}  // namespace bnn::client
