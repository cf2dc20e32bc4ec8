// The "build" block every benchmark and experiment JSON carries (issue 16:
// a result must name the binary that produced it well enough to rebuild
// it): the commit compiled in, whether the tree was clean, and the SHA-256
// of the running program and, for programs that drive a server, of the
// server binary they ran.
#ifndef BNN_BENCH_COMMON_PROVENANCE_H_
#define BNN_BENCH_COMMON_PROVENANCE_H_

#include <string>

#include <nlohmann/json.hpp>

namespace bnn::bench {

// {"commit", "tree_clean", "binary", "binary_sha256"[, "server_binary",
// "server_sha256"][, "error"]}; `server_binary` empty: no server fields.
nlohmann::json ProvenanceJson(const std::string& server_binary = "");

}  // namespace bnn::bench

#endif  // BNN_BENCH_COMMON_PROVENANCE_H_
