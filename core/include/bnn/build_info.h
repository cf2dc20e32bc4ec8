// What the programs' --version prints. Defined by the bnn_build_info
// library (core/CMakeLists.txt), not bnn_core: it alone includes the
// commit header that cmake/BuildCommit.cmake regenerates, so a new commit
// recompiles one file and relinks only the programs (bnn-server, bnnctl).
#ifndef BNN_BUILD_INFO_H_
#define BNN_BUILD_INFO_H_

#include <string>

#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace bnn {

// The abbreviated git commit of the build ("-dirty" appended when tracked
// files differed from it; "unknown" outside a git checkout).
const char* BuildCommit();

// "PROGRAM VERSION (commit COMMIT)", e.g. "bnnctl 0.1.0 (commit 09c3e93a1b2c)".
std::string VersionLine(absl::string_view program);

// Where a result came from, for the JSON records of benchmarks and paper
// runs: enough to tell whether a binary rebuilt from `commit` is the one
// that produced it.
struct BuildProvenance {
  // BuildCommit() without the "-dirty" suffix.
  std::string commit;
  // False when the tree the binary was built from differed from `commit`
  // (or was not a git checkout): then the commit alone cannot rebuild it.
  bool tree_clean = false;
  // The running executable (/proc/self/exe) and the SHA-256 of its bytes;
  // empty with `error` set when it could not be read.
  std::string binary_path;
  std::string binary_sha256;
  std::string error;
};

// The running program's provenance. Reads the whole executable once.
BuildProvenance RunningBinaryProvenance();

// Lower-case hex SHA-256 of the file at `path` (e.g. the bnn-server binary a
// benchmark drives); NotFound or DataLoss naming the path if unreadable.
absl::StatusOr<std::string> FileSha256Hex(const std::string& path);

}  // namespace bnn

#endif  // BNN_BUILD_INFO_H_
