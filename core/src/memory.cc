#include "bnn/memory.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace bnn {

int64_t AddBytes(int64_t a, int64_t b) {
  return a > kMaxBytes - b ? kMaxBytes : a + b;
}

int64_t MulBytes(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t f : factors) {
    if (f <= 0) return 0;
    product = product > kMaxBytes / f ? kMaxBytes : product * f;
  }
  return product;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes >= kMaxBytes) return "more than 2 EiB";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B")
                   : absl::StrFormat("%.1f %s", value, units[unit]);
}

void MemoryEstimate::Add(std::string what, int64_t part_bytes) {
  if (part_bytes <= 0) return;
  bytes = AddBytes(bytes, part_bytes);
  parts.push_back({std::move(what), part_bytes});
}

void MemoryEstimate::Add(absl::string_view prefix,
                         const MemoryEstimate& other) {
  for (const Part& part : other.parts) {
    Add(absl::StrCat(prefix, part.what), part.bytes);
  }
}

std::string MemoryEstimate::PartsToString(int max_parts) const {
  std::vector<Part> largest = parts;
  std::stable_sort(
      largest.begin(), largest.end(),
      [](const Part& a, const Part& b) { return a.bytes > b.bytes; });
  std::string out;
  for (int i = 0; i < static_cast<int>(largest.size()) && i < max_parts; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", largest[i].what, " ",
                    FormatBytes(largest[i].bytes));
  }
  if (static_cast<int>(largest.size()) > max_parts)
    absl::StrAppend(&out, ", ...");
  return out;
}

std::string MemoryEstimate::ToString(int max_parts) const {
  if (parts.empty()) return FormatBytes(bytes);
  return absl::StrCat(FormatBytes(bytes), " (", PartsToString(max_parts), ")");
}

}  // namespace bnn
