#include "bnn/format.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace bnn {
namespace {

uint64_t Bits(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

// strtod is the C library's parser, independent of std::to_chars.
double Parse(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  EXPECT_EQ(*end, '\0') << text;
  return value;
}

// The dense reference: printf's %.*g at increasing precision until the text
// parses back exactly, with integers below 1e15 in full (%.0f). This is the
// rule the service used before std::to_chars, and %.{p}g with the smallest
// such p is fixed exactly when -4 <= exponent < p.
std::string Reference(double value) {
  char text[64];
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    std::snprintf(text, sizeof(text), "%.0f", value);
    return text;
  }
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (Bits(Parse(text)) == Bits(value)) break;
  }
  return text;
}

void ExpectRoundTrip(double value) {
  const std::string text = ShortestDouble(value);
  EXPECT_EQ(Bits(Parse(text)), Bits(value)) << text;
  EXPECT_EQ(text, Reference(value));
}

TEST(ShortestDoubleTest, RandomBitPatternsRoundTripAndMatchTheReference) {
  // Uniform bit patterns cover every exponent, subnormals included.
  std::mt19937_64 rng(11);
  int checked = 0;
  while (checked < 100000) {
    const uint64_t bits = rng();
    double value = 0;
    std::memcpy(&value, &bits, sizeof(value));
    if (!std::isfinite(value)) continue;
    ExpectRoundTrip(value);
    ++checked;
  }
}

TEST(ShortestDoubleTest, RandomValuesAtEveryScaleRoundTrip) {
  // Values as people and optimisers produce them: a few digits, or many,
  // from 1e-12 to 1e20.
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> mantissa(-10.0, 10.0);
  for (int power = -12; power <= 20; ++power) {
    for (int i = 0; i < 500; ++i) {
      const double value = mantissa(rng) * std::pow(10.0, power);
      ExpectRoundTrip(value);
      ExpectRoundTrip(std::round(value * 1000) / 1000);
    }
  }
}

TEST(ShortestDoubleTest, ShortestDigits) {
  EXPECT_EQ(ShortestDouble(0.1), "0.1");
  EXPECT_EQ(ShortestDouble(0.3), "0.3");
  EXPECT_EQ(ShortestDouble(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(ShortestDouble(-2.5), "-2.5");
  EXPECT_EQ(ShortestDouble(0.0001), "0.0001");
  EXPECT_EQ(ShortestDouble(1e-5), "1e-05");
  EXPECT_EQ(ShortestDouble(1.5e300), "1.5e+300");
  EXPECT_EQ(ShortestDouble(std::numeric_limits<double>::max()),
            "1.7976931348623157e+308");
}

TEST(ShortestDoubleTest, IntegersBelow1e15InFull) {
  EXPECT_EQ(ShortestDouble(1), "1");
  EXPECT_EQ(ShortestDouble(100), "100");
  EXPECT_EQ(ShortestDouble(100000), "100000");
  EXPECT_EQ(ShortestDouble(-42), "-42");
  EXPECT_EQ(ShortestDouble(1e14), "100000000000000");
  EXPECT_EQ(ShortestDouble(999999999999999.0), "999999999999999");
  EXPECT_EQ(ShortestDouble(1e15), "1e+15");
  // 16 significant digits print in full too: scientific would not be shorter.
  EXPECT_EQ(ShortestDouble(1234567890123456.0), "1234567890123456");
  EXPECT_EQ(ShortestDouble(1e20), "1e+20");
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int64_t> integer(-999999999999999,
                                                 999999999999999);
  for (int i = 0; i < 10000; ++i) {
    const int64_t n = integer(rng);
    EXPECT_EQ(ShortestDouble(static_cast<double>(n)), std::to_string(n));
  }
}

TEST(ShortestDoubleTest, SignedZerosAndSubnormals) {
  EXPECT_EQ(ShortestDouble(0.0), "0");
  EXPECT_EQ(ShortestDouble(-0.0), "-0");
  EXPECT_TRUE(std::signbit(Parse(ShortestDouble(-0.0))));
  const double smallest = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(ShortestDouble(smallest), "5e-324");
  EXPECT_EQ(ShortestDouble(-smallest), "-5e-324");
  EXPECT_EQ(ShortestDouble(std::numeric_limits<double>::min()),
            "2.2250738585072014e-308");
  for (double value :
       {smallest, 3 * smallest, std::numeric_limits<double>::min() / 3,
        std::nextafter(std::numeric_limits<double>::min(), 0.0)}) {
    ExpectRoundTrip(value);
    ExpectRoundTrip(-value);
  }
}

TEST(ShortestDoubleTest, NonFinite) {
  EXPECT_EQ(ShortestDouble(std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(ShortestDouble(-std::numeric_limits<double>::quiet_NaN()), "nan");
  EXPECT_EQ(ShortestDouble(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(ShortestDouble(-std::numeric_limits<double>::infinity()), "-inf");
}

}  // namespace
}  // namespace bnn
