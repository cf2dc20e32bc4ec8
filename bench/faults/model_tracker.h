// What the crash test expects of named models (docs/api.md#named-models)
// after every restart: publishes and alias moves whose RPC returned OK are
// acknowledged and must be found again; the one in flight at a kill may have
// committed or not, but either way wholly (a publish with aliases made its
// version and moved them, or did neither); `latest` names the newest
// version; version numbers are never reused; and every job that trained
// with `publish` and SUCCEEDED has its snapshot published exactly once
// under its model name (the job's state and the publish commit together, or
// the restart completes the publish).
#ifndef BNN_BENCH_FAULTS_MODEL_TRACKER_H_
#define BNN_BENCH_FAULTS_MODEL_TRACKER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/faults/store_model.h"
#include "client/bnn_client.h"

namespace bnn::faults {

// One call of a model operation: PublishModel(model, snapshot_id, aliases)
// or SetAlias(model, alias, version).
struct ModelCall {
  bool publish = true;
  std::string snapshot_id;           // publish
  std::vector<std::string> aliases;  // publish: user aliases to move
  std::string alias;                 // set alias
  int64_t version = 0;               // set alias
};

class ModelTracker {
 public:
  // The model jobs publish to (only jobs do), and the user aliases the test
  // moves.
  static constexpr const char* kJobModel = "trained";
  static const std::vector<std::string>& UserAliases();

  // Acknowledged calls on `model` (the RPC returned OK with `version` for a
  // publish; for SetAlias the call's own version).
  void AckCall(const std::string& model, const ModelCall& call,
               int64_t version);
  // The call in flight at the kill (at most one per model: a model
  // operation's calls run one after another).
  void AddPending(const std::string& model, const ModelCall& call);

  // Acknowledged versions of `model`, oldest first.
  std::vector<int64_t> Versions(const std::string& model) const;

  // The checks after a restart (or after the setup); `store` holds the
  // jobs' last states (StoreModel::Verify ran first, so every job has
  // finished) and collects violations.
  void Verify(client::BnnClient& client, int cycle, StoreModel& store,
              Outcomes* outcomes);

 private:
  struct TrackedModel {
    std::map<int64_t, std::string> versions;  // version -> snapshot id
    std::map<std::string, int64_t> aliases;   // user aliases
    std::optional<ModelCall> pending;
  };

  void CheckModel(client::BnnClient& client, int cycle, const std::string& name,
                  TrackedModel& model, StoreModel& store, Outcomes* outcomes);
  void CheckJobModel(client::BnnClient& client, int cycle, StoreModel& store);

  std::map<std::string, TrackedModel> models_;
  // Versions of kJobModel seen so far: version -> snapshot id.
  std::map<int64_t, std::string> job_versions_;
};

}  // namespace bnn::faults

#endif  // BNN_BENCH_FAULTS_MODEL_TRACKER_H_
