// A data directory's store (MetadataDir) for the tests of the stores built
// on it: Reopen() closes and opens it again, as a restart of the server
// would.
#ifndef BNN_TESTS_SERVER_STORE_STORE_DIR_H_
#define BNN_TESTS_SERVER_STORE_STORE_DIR_H_

#include <string>
#include <utility>

#include <absl/status/statusor.h>
#include <gtest/gtest.h>

#include "server/store/metadata_dir.h"

namespace bnn::server::testutil {

class StoreDir {
 public:
  explicit StoreDir(std::string path) : path_(std::move(path)) { Reopen(); }

  // Closes the store (the caller drops what it built on it first) and opens
  // it again: temporaries removed, blobs verified and swept.
  void Reopen() {
    dir_ = MetadataDir();
    absl::StatusOr<MetadataDir> dir =
        MetadataDir::Open(path_, MetadataDir::Options());
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *std::move(dir);
  }

  MetadataStore* metadata() { return dir_.metadata.get(); }
  BlobStore* blobs() { return dir_.blobs.get(); }
  const MetadataDir& dir() const { return dir_; }
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  MetadataDir dir_;
};

}  // namespace bnn::server::testutil

#endif  // BNN_TESTS_SERVER_STORE_STORE_DIR_H_
