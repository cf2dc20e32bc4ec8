#include "server/common/flag_names.h"

#include <algorithm>

namespace bnn::server {

std::vector<std::string> NormalizeFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t j = 2; j < end; ++j) {
      if (arg[j] == '-') arg[j] = '_';
    }
  }
  return args;
}

}  // namespace bnn::server
