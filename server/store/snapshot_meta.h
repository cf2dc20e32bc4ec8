// What the snapshot store indexes about a snapshot, taken from the decoded
// snapshot when it is stored.
#ifndef BNN_SERVER_STORE_SNAPSHOT_META_H_
#define BNN_SERVER_STORE_SNAPSHOT_META_H_

#include <cstdint>

#include <absl/strings/string_view.h>

#include "bnn/io/snapshot.h"

#include "store/store.pb.h"

namespace bnn::server {

// The metadata of `snapshot`, stored as `snapshot_id` in a file of
// `size_bytes` bytes. `snapshot.posterior` must be set (it is on every
// decoded or trained snapshot).
store::SnapshotMeta SnapshotMetaOf(const Snapshot& snapshot,
                                   absl::string_view snapshot_id,
                                   int64_t size_bytes);

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_SNAPSHOT_META_H_
