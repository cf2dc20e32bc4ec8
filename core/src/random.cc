#include "bnn/random.h"

#include <locale>
#include <sstream>

namespace bnn {

std::string Rng::SaveState() const {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << seed_ << ' ' << engine_ << ' ' << normal_ << ' ' << uniform_;
  return out.str();
}

absl::Status Rng::LoadState(absl::string_view state) {
  std::istringstream in{std::string(state)};
  in.imbue(std::locale::classic());
  uint64_t seed = 0;
  std::mt19937_64 engine;
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  in >> seed >> engine >> normal >> uniform;
  if (in.fail() || !(in >> std::ws).eof()) {
    return absl::InvalidArgumentError(
        "random generator state does not parse (not written by "
        "Rng::SaveState of this standard library)");
  }
  seed_ = seed;
  engine_ = engine;
  normal_ = normal;
  uniform_ = uniform;
  return absl::OkStatus();
}

}  // namespace bnn
