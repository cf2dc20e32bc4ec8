// The content-addressed blob store: names are SHA-256 of the bytes, equal
// contents are stored once, temporaries of a crash are deleted, a blob
// whose bytes changed is quarantined and never served, and the sweep
// deletes exactly the unreferenced blobs.
#include "server/store/blob_store.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "bnn/io/file.h"
#include "bnn/io/sha256.h"

#include "tests/server/server_test_util.h"

namespace bnn::server {
namespace {

namespace fs = std::filesystem;
using ::bnn::server::testutil::ReadFileOrEmpty;
using ::bnn::server::testutil::StatusIs;
using ::bnn::server::testutil::TempDir;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// Flips one bit of the file at `path`, as a bad disk would.
void FlipBit(const std::string& path, std::streamoff offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(file.good()) << path;
  file.seekg(offset);
  char byte = 0;
  file.get(byte);
  byte ^= 1;
  file.seekp(offset);
  file.put(byte);
}

class BlobStoreTest : public ::testing::Test {
 protected:
  std::string root() const { return dir_.path() + "/blobs"; }

  std::unique_ptr<BlobStore> Open(BlobStore::OpenReport* report = nullptr) {
    absl::StatusOr<std::unique_ptr<BlobStore>> store =
        BlobStore::Open(root(), BlobStore::Options(), report);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  TempDir dir_;
};

TEST_F(BlobStoreTest, PutIsContentAddressedAndStoresContentsOnce) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string contents = "record bytes \x01\x02";
  absl::StatusOr<std::string> blob = store->Put(contents);
  ASSERT_TRUE(blob.ok()) << blob.status();
  EXPECT_EQ(*blob, Sha256Hex(contents));
  EXPECT_TRUE(BlobStore::IsBlobName(*blob));
  absl::StatusOr<std::string> path = store->PathOf(*blob);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, root() + "/objects/" + blob->substr(0, 2) + "/" + *blob);
  EXPECT_EQ(ReadFileOrEmpty(*path), contents);
  EXPECT_EQ(*store->Put(contents), *blob);
  absl::StatusOr<MappedFile> mapped =
      store->Map(*blob, BlobStore::Check::kVerify);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ(mapped->bytes(), contents);
  EXPECT_TRUE(fs::is_empty(root() + "/tmp"));

  EXPECT_THAT(store->PathOf(std::string(64, 'a')).status(),
              StatusIs(absl::StatusCode::kNotFound, std::string(64, 'a')));
  EXPECT_THAT(store->Map("../../etc/passwd", BlobStore::Check::kTrust).status(),
              StatusIs(absl::StatusCode::kNotFound, "not found"));
}

TEST_F(BlobStoreTest, StreamedAndAdoptedFiles) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  absl::StatusOr<std::unique_ptr<FileWriter>> file = store->NewTempFile();
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append("first ").ok());
  ASSERT_TRUE((*file)->Append("second").ok());
  absl::StatusOr<std::string> streamed = store->Commit(*std::move(file));
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(*streamed, Sha256Hex("first second"));
  EXPECT_EQ(ReadFileOrEmpty(*store->PathOf(*streamed)), "first second");

  // An existing file, e.g. a record file of the old layout, is linked in
  // and left in place.
  const std::string old = dir_.path() + "/old.snap";
  ASSERT_TRUE(WriteFileAtomically(old, "old snapshot").ok());
  absl::StatusOr<std::string> adopted = store->Adopt(old);
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(*adopted, Sha256Hex("old snapshot"));
  EXPECT_EQ(ReadFileOrEmpty(*store->PathOf(*adopted)), "old snapshot");
  EXPECT_EQ(ReadFileOrEmpty(old), "old snapshot");
  EXPECT_EQ(*store->Adopt(old), *adopted);
  EXPECT_THAT(store->Adopt(dir_.path() + "/missing").status(),
              StatusIs(absl::StatusCode::kNotFound, "missing"));
}

TEST_F(BlobStoreTest, OpenDeletesOrphanedTemporaries) {
  std::string blob;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    blob = *store->Put("kept");
    // Two writes a crash interrupted.
    absl::StatusOr<std::unique_ptr<FileWriter>> file = store->NewTempFile();
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append("half").ok());
    ASSERT_TRUE(WriteFileAtomically(root() + "/tmp/other.tmp", "x").ok());
    fs::copy_file((*file)->temp_path(), root() + "/tmp/copy.tmp");
  }
  // The writer above deleted its own temporary when dropped; the other two
  // are a crash's leftovers.
  BlobStore::OpenReport report;
  auto store = Open(&report);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(report.temporaries_removed, 2);
  EXPECT_EQ(report.blobs, 1);
  EXPECT_EQ(report.bytes, 4);
  EXPECT_THAT(report.quarantined, IsEmpty());
  EXPECT_TRUE(fs::is_empty(root() + "/tmp"));
  EXPECT_EQ(ReadFileOrEmpty(*store->PathOf(blob)), "kept");
}

TEST_F(BlobStoreTest, FlippedBitIsQuarantinedOnOpenAndNeverServed) {
  std::string good;
  std::string bad;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    good = *store->Put("good blob");
    bad = *store->Put("bad blob");
    FlipBit(*store->PathOf(bad), 3);
  }
  BlobStore::OpenReport report;
  auto store = Open(&report);
  ASSERT_NE(store, nullptr);
  ASSERT_THAT(report.quarantined, SizeIs(1));
  EXPECT_EQ(report.quarantined[0].blob, bad);
  EXPECT_EQ(report.quarantined[0].path, root() + "/quarantine/" + bad);
  EXPECT_EQ(report.blobs, 1);
  EXPECT_TRUE(fs::exists(root() + "/quarantine/" + bad));
  EXPECT_THAT(store->PathOf(bad).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       absl::StrCat("blob ", bad, " is quarantined")));
  EXPECT_THAT(store->Map(bad, BlobStore::Check::kTrust).status(),
              StatusIs(absl::StatusCode::kDataLoss, bad));
  EXPECT_TRUE(store->Map(good, BlobStore::Check::kVerify).ok());

  // Still refused after a restart, without being reported again.
  store.reset();
  store = Open(&report);
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(report.quarantined, IsEmpty());
  ASSERT_THAT(store->Quarantined(), SizeIs(1));
  EXPECT_EQ(store->Quarantined()[0].blob, bad);
  EXPECT_THAT(store->PathOf(bad).status(),
              StatusIs(absl::StatusCode::kDataLoss, bad));

  // The right bytes stored again are served again.
  EXPECT_EQ(*store->Put("bad blob"), bad);
  EXPECT_EQ(ReadFileOrEmpty(*store->PathOf(bad)), "bad blob");
  store.reset();
  store = Open(&report);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->PathOf(bad).ok());
}

TEST_F(BlobStoreTest, VerifiedReadQuarantinesCorruptionFoundLater) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string blob = *store->Put("payload");
  const std::string other = *store->Put("other");
  FlipBit(*store->PathOf(blob), 0);
  // A trusted read does not hash (the record frame's CRC catches it).
  EXPECT_TRUE(store->Map(blob, BlobStore::Check::kTrust).ok());
  EXPECT_THAT(store->Map(blob, BlobStore::Check::kVerify).status(),
              StatusIs(absl::StatusCode::kDataLoss,
                       absl::StrCat("blob ", blob, " is quarantined")));
  EXPECT_THAT(store->PathOf(blob).status(),
              StatusIs(absl::StatusCode::kDataLoss, blob));
  // Verify finds what else went bad.
  FlipBit(*store->PathOf(other), 1);
  absl::StatusOr<std::vector<QuarantinedBlob>> failed = store->Verify();
  ASSERT_TRUE(failed.ok()) << failed.status();
  ASSERT_THAT(*failed, SizeIs(1));
  EXPECT_EQ((*failed)[0].blob, other);
  EXPECT_THAT(store->Quarantined(), SizeIs(2));
}

TEST_F(BlobStoreTest, SweepDeletesExactlyTheUnreferencedBlobs) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string a = *store->Put("a");
  const std::string b = *store->Put("b");
  const std::string c = *store->Put("c");
  absl::StatusOr<int64_t> deleted = store->Sweep({a, c});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_TRUE(store->PathOf(a).ok());
  EXPECT_THAT(store->PathOf(b).status(),
              StatusIs(absl::StatusCode::kNotFound, b));
  EXPECT_TRUE(store->PathOf(c).ok());
  EXPECT_EQ(*store->Sweep({a, c}), 0);
  EXPECT_EQ(*store->Sweep({}), 2);
}

// A blob directory other servers share (a PostgreSQL metadata store): only
// old temporaries are deleted, and nothing a record may be about to name.
TEST_F(BlobStoreTest, SharedStoreKeepsYoungTemporariesAndDeletesNoBlob) {
  BlobStore::Options options;
  options.shared = true;
  std::string blob;
  {
    absl::StatusOr<std::unique_ptr<BlobStore>> store =
        BlobStore::Open(root(), options, nullptr);
    ASSERT_TRUE(store.ok()) << store.status();
    blob = *(*store)->Put("shared");
  }
  // Another replica's write in progress, and a crash's leftover of long ago.
  ASSERT_TRUE(WriteFileAtomically(root() + "/tmp/young.tmp", "x").ok());
  ASSERT_TRUE(WriteFileAtomically(root() + "/tmp/old.tmp", "x").ok());
  fs::last_write_time(
      root() + "/tmp/old.tmp",
      fs::file_time_type::clock::now() - std::chrono::hours(25));
  BlobStore::OpenReport report;
  absl::StatusOr<std::unique_ptr<BlobStore>> store =
      BlobStore::Open(root(), options, &report);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(report.temporaries_removed, 1);
  EXPECT_TRUE(fs::exists(root() + "/tmp/young.tmp"));
  EXPECT_FALSE(fs::exists(root() + "/tmp/old.tmp"));
  // Unreferenced here, perhaps about to be named by another replica.
  bool asked = false;
  EXPECT_TRUE((*store)
                  ->RemoveIfUnreferenced(blob,
                                         [&]() -> absl::StatusOr<bool> {
                                           asked = true;
                                           return false;
                                         })
                  .ok());
  EXPECT_FALSE(asked);
  EXPECT_TRUE((*store)->PathOf(blob).ok());
  EXPECT_THAT((*store)->Sweep({}).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "shared with other servers"));
  EXPECT_TRUE((*store)->PathOf(blob).ok());
}

}  // namespace
}  // namespace bnn::server
