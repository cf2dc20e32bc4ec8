// Resource ids: "<prefix>-<16 lowercase hex digits>", e.g.
// "ds-0123456789abcdef".
#ifndef BNN_SERVER_STORE_IDS_H_
#define BNN_SERVER_STORE_IDS_H_

#include <string>

#include <absl/strings/string_view.h>

namespace bnn::server {

inline constexpr absl::string_view kDatasetIdPrefix = "ds";
inline constexpr absl::string_view kSnapshotIdPrefix = "snap";
inline constexpr absl::string_view kJobIdPrefix = "job";
// A server's id (LoadOrCreateServerId, data_dir_lock.h).
inline constexpr absl::string_view kServerIdPrefix = "srv";

// A fresh id with 64 random bits (collisions are checked by the stores).
// Thread-safe.
std::string NewId(absl::string_view prefix);

// Whether `id` has the form NewId(prefix) produces; guards file names taken
// from a directory listing.
bool IsId(absl::string_view prefix, absl::string_view id);

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_IDS_H_
