// What the crash test expects the server's store to hold, and the checks it
// runs after every restart.
//
// Objects whose RPC returned OK are acknowledged: each must be found again,
// unchanged, after every later restart. Operations whose RPC had not
// returned when the server was killed are in doubt: after the restart each
// may have committed or not, but whatever is visible must be complete and
// equal to what was sent, and is acknowledged from then on; what is not
// visible then must never appear later. Objects are recognised without
// trusting the server's ids alone: datasets by their unique names and
// content hashes, imported snapshots by their bytes, jobs by their seeds.
// Besides the API, the metadata database is read, so that ids the API does
// not list (an unreadable latest version, a job no client knows) are looked
// up too, and the data directory listed, so that leftover temporary files
// are noticed.
#ifndef BNN_BENCH_FAULTS_STORE_MODEL_H_
#define BNN_BENCH_FAULTS_STORE_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <absl/time/time.h>

#include "bnn/data/dataset_hash.h"

#include "bench/faults/workload.h"
#include "client/bnn_client.h"

namespace bnn::faults {

// One broken guarantee, found after the restart that followed `cycle`'s
// kill (cycle 0: the setup, before any kill).
struct Violation {
  int cycle = 0;
  // "lost" (acknowledged object missing), "changed" (acknowledged object
  // different), "partial" (an in-doubt object visible but not as sent),
  // "unknown" (an object nobody created), "job" (a job in a state the docs
  // do not allow), "stuck" (a job that does not finish), "disk" (leftover
  // files), "rpc" (an operation refused before the kill), "restart".
  std::string kind;
  std::string detail;
};

// The expected rows count and hash of one dataset version.
struct VersionExpect {
  int64_t num_rows = 0;
  std::string hash;
};

// A snapshot file the test imports, with what identifies it.
struct ImportSource {
  std::string name;
  std::string bytes;
  std::string sha256;
  int64_t num_features = 0;
  std::vector<double> fingerprint;
};

// An upload whose RPC did not return OK before the kill.
struct PendingUpload {
  std::string name;
  Schema schema;
  VersionExpect expect;
  DatasetHasher hasher;  // after its rows
};

// An append whose RPC did not return OK before the kill.
struct PendingAppend {
  std::string dataset_id;
  int64_t version = 0;  // the version it would create
  VersionExpect expect;
  DatasetHasher hasher;  // after its rows
};

// A StartTraining call that did not return before the kill.
struct PendingJob {
  uint64_t seed = 0;
  std::string dataset_id;
};

// When the server was killed and when the next one started.
struct Restart {
  absl::Time kill_time;
  absl::Time start_time;
};

// What the restarts revealed of the operations in doubt, for the report.
struct Outcomes {
  // In-doubt operations of each OpKind found complete / not visible (for
  // kTrain: StartTraining calls whose job exists / does not).
  int64_t committed[kNumOpKinds] = {};
  int64_t not_committed[kNumOpKinds] = {};
  // RUNNING at the kill, now FAILED (servers before checkpoints).
  int64_t jobs_failed_by_restart = 0;
  // RUNNING at the kill, finished after the restart: resumed from its
  // checkpoint (or from the start), or its snapshot, written before the
  // kill, adopted.
  int64_t jobs_adopted = 0;
  int64_t jobs_queued_then_run = 0;  // QUEUED at the kill, ran after it
};

class StoreModel {
 public:
  // `data_dir` is the server's --data-dir; `max_concurrent_jobs` its flag,
  // which bounds how many jobs a kill can interrupt.
  StoreModel(std::string data_dir, int max_concurrent_jobs)
      : data_dir_(std::move(data_dir)),
        max_concurrent_jobs_(max_concurrent_jobs) {}

  // Acknowledged results (the RPC returned OK). A response that differs
  // from what was sent is a violation at once.
  void AckUpload(int cycle, const std::string& name, const Schema& schema,
                 const DatasetHasher& hasher, const v1::DatasetInfo& info);
  void AckAppend(int cycle, const std::string& dataset_id,
                 const DatasetHasher& hasher, int64_t num_rows,
                 const v1::DatasetInfo& info);
  void AckImport(int cycle, const ImportSource& source,
                 const v1::SnapshotInfo& info);
  void AckJob(const std::string& job_id, uint64_t seed,
              const std::string& dataset_id);
  // The last state a client saw of a job before the kill.
  void SawJob(const v1::Job& job);

  // Operations in doubt at the kill.
  void AddPendingUpload(PendingUpload pending);
  void AddPendingAppend(PendingAppend pending);
  void AddPendingImport(const ImportSource* source);
  void AddPendingJob(PendingJob pending);

  // The checks after `restart` (unset for the setup, which kills nothing).
  // Waits up to `job_timeout` for every job to finish. Resolves every
  // pending operation; records fingerprints of snapshots seen for the first
  // time.
  void Verify(client::BnnClient& client, int cycle,
              std::optional<Restart> restart, absl::Duration job_timeout,
              Outcomes* outcomes);

  // Everything found broken so far; AddViolation records what the caller
  // finds (refused operations, a failed restart).
  const std::vector<Violation>& violations() const { return violations_; }
  void AddViolation(int cycle, std::string kind, std::string detail);

  // The latest acknowledged version of each dataset, to append to; schema
  // and hasher point into the model and stay valid until its next change.
  struct DatasetSummary {
    std::string id;
    int64_t num_rows = 0;
    int64_t num_features = 0;
    int64_t version = 0;
    const Schema* schema = nullptr;
    const DatasetHasher* hasher = nullptr;
  };
  std::vector<DatasetSummary> Datasets() const;
  int64_t num_snapshots() const {
    return static_cast<int64_t>(snapshots_.size());
  }
  int64_t num_jobs() const { return static_cast<int64_t>(jobs_.size()); }
  // The acknowledged snapshots' ids, and the last state seen of every job
  // (after Verify: the state the restart left it in).
  std::vector<std::string> SnapshotIds() const;
  std::vector<v1::Job> SeenJobs() const;
  int64_t num_dataset_versions() const;

 private:
  struct TrackedDataset {
    std::string id;
    std::string name;
    Schema schema;
    std::vector<VersionExpect> versions;  // [v - 1]
    DatasetHasher hasher;                 // after the latest version
  };
  struct TrackedSnapshot {
    std::string origin;  // "import NAME" or "job ID"
    int64_t num_features = 0;
    int64_t size_bytes = 0;
    std::string sha256;  // "" until exported once
    std::vector<double> fingerprint;
    bool verified_bytes = false;
  };
  struct TrackedJob {
    uint64_t seed = 0;
    std::string dataset_id;
    v1::Job last_seen;  // state UNSPECIFIED until seen
  };

  void CheckDataDir(int cycle);
  // The ids in `column` of the metadata database's `table`, read beside the
  // server (a record the API does not list is found too).
  std::set<std::string> IdsInStore(int cycle, const std::string& table,
                                   const std::string& column);
  void CheckDatasets(client::BnnClient& client, int cycle, Outcomes* outcomes);
  void CheckVersion(client::BnnClient& client, int cycle,
                    const TrackedDataset& dataset, int64_t version);
  void CheckJobs(client::BnnClient& client, int cycle,
                 std::optional<Restart> restart, absl::Duration job_timeout,
                 Outcomes* outcomes);
  void CheckSnapshots(client::BnnClient& client, int cycle, Outcomes* outcomes);
  // Registers a snapshot first seen now (fingerprint from the server).
  void TrackSnapshot(client::BnnClient& client, int cycle,
                     const std::string& snapshot_id, std::string origin);

  const std::string data_dir_;
  const int max_concurrent_jobs_;
  std::map<std::string, TrackedDataset> datasets_;
  std::map<std::string, TrackedSnapshot> snapshots_;
  std::map<std::string, TrackedJob> jobs_;
  std::vector<PendingUpload> pending_uploads_;
  std::vector<PendingAppend> pending_appends_;
  std::vector<const ImportSource*> pending_imports_;
  std::vector<PendingJob> pending_jobs_;
  // Imports acknowledged since the last Verify, whose bytes it compares.
  std::map<std::string, const ImportSource*> new_imports_;
  // Tracked snapshots whose bytes the next Verify exports again, in turn.
  size_t export_cursor_ = 0;
  std::vector<Violation> violations_;
};

}  // namespace bnn::faults

#endif  // BNN_BENCH_FAULTS_STORE_MODEL_H_
