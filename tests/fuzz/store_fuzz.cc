// Fuzz target: the decoding of a data directory's records when the server
// opens it, migrates it from the record-file layout (MetadataDir::Open) and
// serves from it: dataset version files (read whole, and walked in place as
// an acquisition pool), job records, snapshot records (.info) and snapshots
// (.snap).
//
// Input: one byte, whose bits 0-6 (mod 5) pick a file of the data
// directory tests/server/store/golden_data (a dataset with two versions, a
// job and a snapshot written by bnn-server in the record-file layout) and
// whose bit 7 asks to repair the record frame (RepairRecordFrame); then
// that file's new contents. The directory, with that one file replaced, is
// opened (migrated) and the store of the replaced file's kind (the dataset,
// job or snapshot store) looks up and reads everything.
//
// Invariants: a corrupt file never keeps the directory from opening (the
// migration skips it); every lookup and read is OK, NotFound (a record the
// migration skipped) or fails with DataLoss or FailedPrecondition (a newer
// format) and a message; what is readable is consistent: a dataset version
// passes Dataset::Validate with the row count and width its metadata says,
// its rows read in place (the pool) equal its rows decoded, a readable job
// that was running is interrupted by the restart, and a readable snapshot
// serves (CheckServes).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "bnn/check.h"
#include "bnn/data/dataset.h"

#include "server/store/dataset_store.h"
#include "server/store/job_store.h"
#include "server/store/metadata_dir.h"
#include "server/store/snapshot_store.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/serving_check.h"

namespace bnn::fuzz {
namespace {

namespace fs = std::filesystem;

constexpr char kDatasetId[] = "ds-d2f12dccf5712957";
constexpr char kJobId[] = "job-c5c7ec00269a648e";
constexpr char kSnapshotId[] = "snap-d50c100cac863123";
// A scratch directory (in memory when /dev/shm exists, so the stores'
// fsyncs cost nothing), removed at exit.
class Scratch {
 public:
  Scratch() {
    std::string pattern =
        (fs::is_directory("/dev/shm") ? "/dev/shm"
                                      : fs::temp_directory_path().string()) +
        "/bnn-store-fuzz-XXXXXX";
    BNN_CHECK(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void CheckReadError(const absl::Status& status, absl::string_view what) {
  CheckStatus(
      status,
      {absl::StatusCode::kDataLoss, absl::StatusCode::kFailedPrecondition,
       absl::StatusCode::kNotFound},
      what);
}

void CheckDatasets(server::MetadataDir& dir, const fs::path& data_dir) {
  const auto store = std::make_unique<server::DatasetStore>(dir.metadata.get(),
                                                            dir.blobs.get());
  for (const int64_t version : {1, 2}) {
    const absl::StatusOr<server::store::DatasetMeta> meta =
        store->Get(kDatasetId, version);
    CheckReadError(meta.status(), "DatasetStore::Get");
    if (!meta.ok()) continue;
    const absl::StatusOr<Dataset> rows = store->Load(kDatasetId, version);
    CheckReadError(rows.status(), "DatasetStore::Load");
    const absl::StatusOr<std::unique_ptr<PoolSource>> pool =
        store->OpenRows(kDatasetId, version);
    CheckReadError(pool.status(), "DatasetStore::OpenRows");
    if (!rows.ok()) continue;
    BNN_CHECK_OK(rows->Validate());
    BNN_CHECK_EQ(rows->num_rows(), meta->num_rows());
    BNN_CHECK_EQ(rows->num_features, meta->num_features());
    if (!pool.ok()) continue;
    BNN_CHECK_EQ((*pool)->num_rows(), rows->num_rows());
    BNN_CHECK_EQ((*pool)->num_features(), rows->num_features);
    std::vector<double> read;
    BNN_CHECK_OK((*pool)->Read(0, (*pool)->num_rows(), &read));
    BNN_CHECK(read == rows->features);
  }
}

void CheckJobs(server::MetadataDir& dir, const fs::path& data_dir) {
  absl::StatusOr<std::unique_ptr<server::JobStore>> store =
      server::JobStore::Open(dir.metadata.get(),
                             (data_dir / "checkpoints").string());
  BNN_CHECK_OK(store.status());
  const absl::StatusOr<server::store::JobRecord> job = (*store)->Get(kJobId);
  CheckReadError(job.status(), "JobStore::Get");
  if (!job.ok()) return;
  BNN_CHECK(job->job_id() == kJobId);
  BNN_CHECK(job->state() != server::store::JobRecord::RUNNING);
}

void CheckSnapshots(server::MetadataDir& dir, const fs::path& data_dir) {
  const auto store = std::make_unique<server::SnapshotStore>(dir.metadata.get(),
                                                             dir.blobs.get());
  const absl::StatusOr<server::store::SnapshotMeta> meta =
      store->GetMeta(kSnapshotId);
  CheckReadError(meta.status(), "SnapshotStore::GetMeta");
  if (!meta.ok()) return;
  absl::StatusOr<Snapshot> snapshot = store->Read(kSnapshotId);
  CheckReadError(snapshot.status(), "SnapshotStore::Read");
  if (!snapshot.ok()) return;
  CheckServes(std::make_shared<const Snapshot>(*std::move(snapshot)));
}

// A file of the golden data directory: its store's folder, its name, and
// the checks of that store.
struct StoreFile {
  const char* folder;
  const char* name;
  void (*check)(server::MetadataDir& dir, const fs::path& data_dir);
};
constexpr StoreFile kFiles[] = {
    {"datasets", "ds-d2f12dccf5712957.dataset", CheckDatasets},
    {"datasets", "ds-d2f12dccf5712957.v2.dataset", CheckDatasets},
    {"jobs", "job-c5c7ec00269a648e.job", CheckJobs},
    {"snapshots", "snap-d50c100cac863123.info", CheckSnapshots},
    {"snapshots", "snap-d50c100cac863123.snap", CheckSnapshots},
};

}  // namespace
}  // namespace bnn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace bnn;
  using namespace bnn::fuzz;
  // The stores log every unreadable file, and protobuf every string field
  // with invalid UTF-8; fuzz inputs are full of both.
  [[maybe_unused]] static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  static const Scratch scratch;
  static const fs::path golden =
      fs::path(BNN_SOURCE_DIR) / "tests/server/store/golden_data";

  FuzzInput input(data, size);
  const uint8_t selector = input.Byte();
  std::string contents(input.Rest());
  if ((selector & 0x80) != 0) RepairRecordFrame(&contents);

  // The whole directory is migrated; the store of the replaced file's kind
  // is checked.
  const StoreFile& file = kFiles[(selector & 0x7f) % std::size(kFiles)];
  const fs::path data_dir = scratch.path() / "data";
  fs::remove_all(data_dir);
  fs::copy(golden, data_dir, fs::copy_options::recursive);
  {
    std::ofstream out(data_dir / file.folder / file.name,
                      std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    BNN_CHECK(out.good());
  }
  absl::StatusOr<server::MetadataDir> dir = server::MetadataDir::Open(
      data_dir.string(), server::MetadataDir::Options());
  BNN_CHECK_OK(dir.status());
  file.check(*dir, data_dir);
  return 0;
}
