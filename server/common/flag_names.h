// Command-line flag names of the binaries (bnn-server, bnn-train): absl
// flags are spelled with underscores, the documented ones with dashes.
#ifndef BNN_SERVER_COMMON_FLAG_NAMES_H_
#define BNN_SERVER_COMMON_FLAG_NAMES_H_

#include <string>
#include <vector>

namespace bnn::server {

// argv with the dashes of each flag's name ("--data-dir=x") turned into
// underscores ("--data_dir=x"), for absl::ParseCommandLine; values and
// arguments after "--" are kept as they are.
std::vector<std::string> NormalizeFlagNames(int argc, char** argv);

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_FLAG_NAMES_H_
