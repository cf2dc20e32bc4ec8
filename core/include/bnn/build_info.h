// What the programs' --version prints. Defined by the bnn_build_info
// library (core/CMakeLists.txt), not bnn_core: it alone includes the
// commit header that cmake/BuildCommit.cmake regenerates, so a new commit
// recompiles one file and relinks only the programs (bnn-server, bnnctl).
#ifndef BNN_BUILD_INFO_H_
#define BNN_BUILD_INFO_H_

#include <string>

#include <absl/strings/string_view.h>

namespace bnn {

// The abbreviated git commit of the build ("-dirty" appended when tracked
// files differed from it; "unknown" outside a git checkout).
const char* BuildCommit();

// "PROGRAM VERSION (commit COMMIT)", e.g. "bnnctl 0.1.0 (commit 09c3e93a1b2c)".
std::string VersionLine(absl::string_view program);

}  // namespace bnn

#endif  // BNN_BUILD_INFO_H_
