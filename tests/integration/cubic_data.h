// The synthetic 1-D regression set of SLANG (Mishkin et al., 2018), App. F.1:
// x ~ U[-4, 4], y = x^3 + eps, eps ~ N(0, 9), as used by the quickstart demo.
#ifndef BNN_TESTS_INTEGRATION_CUBIC_DATA_H_
#define BNN_TESTS_INTEGRATION_CUBIC_DATA_H_

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <absl/strings/str_format.h>

namespace bnn::integration {

struct CubicData {
  std::vector<double> x;
  std::vector<double> y;
};

inline CubicData MakeCubicData(int num_points, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-4.0, 4.0);
  std::normal_distribution<double> noise(0.0, 3.0);
  CubicData data;
  for (int i = 0; i < num_points; ++i) {
    const double x = uniform(rng);
    data.x.push_back(x);
    data.y.push_back(x * x * x + noise(rng));
  }
  return data;
}

// Writes "x,y" rows with round-trip precision; false on an I/O error.
inline bool WriteCubicCsv(const CubicData& data, const std::string& path) {
  std::ofstream out(path);
  out << "x,y\n";
  for (size_t i = 0; i < data.x.size(); ++i) {
    out << absl::StrFormat("%.17g,%.17g\n", data.x[i], data.y[i]);
  }
  return static_cast<bool>(out);
}

}  // namespace bnn::integration

#endif  // BNN_TESTS_INTEGRATION_CUBIC_DATA_H_
