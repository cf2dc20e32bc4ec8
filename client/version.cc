// BnnctlVersion: the line every program of the project prints for --version
// (bnn/build_info.h).
#include <string>

#include "bnn/build_info.h"

#include "client/bnnctl_args.h"

namespace bnn::client {

std::string BnnctlVersion() { return VersionLine("bnnctl"); }

}  // namespace bnn::client
