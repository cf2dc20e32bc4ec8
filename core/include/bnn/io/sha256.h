// SHA-256 of a byte string, for content addresses (the server's blob store
// names each file by the SHA-256 of its bytes). The same implementation as
// the dataset fingerprints of bnn/data/dataset_hash.h.
#ifndef BNN_IO_SHA256_H_
#define BNN_IO_SHA256_H_

#include <string>

#include "absl/strings/string_view.h"

namespace bnn {

// Lower-case hex SHA-256 (64 characters) of `data`. O(size), no allocation
// beyond the result.
std::string Sha256Hex(absl::string_view data);

}  // namespace bnn

#endif  // BNN_IO_SHA256_H_
