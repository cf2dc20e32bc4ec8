#include "bench/common/provenance.h"

#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>

#include "bnn/build_info.h"

namespace bnn::bench {

nlohmann::json ProvenanceJson(const std::string& server_binary) {
  const BuildProvenance self = RunningBinaryProvenance();
  nlohmann::json out = {{"commit", self.commit},
                        {"tree_clean", self.tree_clean},
                        {"binary", self.binary_path},
                        {"binary_sha256", self.binary_sha256}};
  std::string error = self.error;
  if (!server_binary.empty()) {
    out["server_binary"] = server_binary;
    absl::StatusOr<std::string> sha = FileSha256Hex(server_binary);
    if (sha.ok()) {
      out["server_sha256"] = *sha;
    } else {
      absl::StrAppend(&error, error.empty() ? "" : "; ",
                      sha.status().message());
    }
  }
  if (!error.empty()) out["error"] = error;
  return out;
}

}  // namespace bnn::bench
