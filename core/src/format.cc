#include "bnn/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

namespace bnn {

std::string ShortestDouble(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Longest scientific form: "-d.dddddddddddddddde-308" (24 characters);
  // the fixed form is only used for exponents below 17, so it is at most
  // "-0.0000" plus 17 digits.
  char buffer[64];
  const std::to_chars_result scientific = std::to_chars(
      buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  char* const end = scientific.ptr;
  char* const e = std::find(buffer, end, 'e');
  const int digits = static_cast<int>(
      std::count_if(buffer, e, [](char c) { return c >= '0' && c <= '9'; }));
  // The exponent ("+15", "-05"); from_chars takes no '+'.
  const char* exponent_begin = e + 1;
  if (*exponent_begin == '+') ++exponent_begin;
  int exponent = 0;
  std::from_chars(exponent_begin, end, exponent);
  if (exponent >= -4 && exponent < std::max(15, digits)) {
    const std::to_chars_result fixed = std::to_chars(
        buffer, buffer + sizeof(buffer), value, std::chars_format::fixed);
    return std::string(buffer, fixed.ptr);
  }
  return std::string(buffer, end);
}

}  // namespace bnn
