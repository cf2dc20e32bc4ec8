// What every bnn-experiment mode shares: the common flags, provenance of a
// run, seeding, training one model, hyperparameter selection, running splits
// in parallel, aggregation (mean and standard error over splits) and the
// JSON / Markdown report. A mode (uci_mode.cc, logreg_mode.cc, ...) only
// decides how to obtain its splits and what to measure on each.
#ifndef BNN_BENCH_ACCURACY_EXPERIMENT_H_
#define BNN_BENCH_ACCURACY_EXPERIMENT_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include <nlohmann/json.hpp>

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"
#include "bnn/methods/options.h"
#include "bnn/model/model_spec.h"
#include "bnn/train/trainer.h"

#include "bench/accuracy/flags.h"
#include "bench/accuracy/tuning.h"

namespace bnn::experiment {

using Json = nlohmann::ordered_json;

// Where a run came from: enough to rerun it.
struct RunInfo {
  // The commit this binary was built from, whether its tree was clean, and
  // the binary's SHA-256 (bench/common/provenance.h), read at start.
  nlohmann::json build;
  std::string build_commit;
  bool build_tree_clean = false;
  std::string git_commit;  // HEAD of the source tree, "unknown" without git
  // Files under core/ and bench/accuracy/ that differed from HEAD when the
  // run started (the binary may not match the commit if non-empty).
  std::vector<std::string> modified_sources;
  std::string command_line;
  std::string started_at;  // UTC, ISO 8601
};
RunInfo CollectRunInfo(int argc, char** argv);

// Flags shared by the modes.
struct CommonOptions {
  std::string method;
  ParamMap params;  // --param k=v; the trainer's "seed" is set per split
  // Hidden layer widths; empty = no hidden layer. `hidden_given` tells a mode
  // whether to fall back to its dataset's default.
  std::vector<int> hidden_sizes;
  bool hidden_given = false;
  Activation activation = Activation::kRelu;
  int max_splits = 0;  // 0: every split
  int threads = 1;
  uint64_t seed = 0;
  std::string json_out;
  int test_samples = 0;  // posterior samples of the test predictive
  TuningGrid grid;       // empty: no tuning
  int folds = 5;
};

// Declares the shared flags on `flags`; `default_test_samples` differs by
// mode (the paper's protocols evaluate with different sample counts).
void DeclareCommonFlags(int default_test_samples, FlagSet* flags);
// Parses them and checks the method, its parameters and every grid point
// against the registry, so that a typo fails before hours of training.
absl::StatusOr<CommonOptions> ParseCommonFlags(const FlagSet& flags);

// --reference METHOD ("none" or empty: no reference) and the parameter
// overrides of --reference-params k=v,... (repeatable), shared by the modes
// that train a reference posterior beside the method.
struct ReferenceFlags {
  std::string method;
  ParamMap overrides;
};
absl::StatusOr<ReferenceFlags> ParseReferenceFlags(const FlagSet& flags);

// Independent random streams of one split, derived from the run's seed so
// that a split's numbers do not depend on the thread count or on which other
// splits run.
enum class Stream : uint64_t {
  kTuning = 1,
  kTraining = 2,
  kPrediction = 3,
  kElbo = 4,
  kReference = 5,
};
uint64_t StreamSeed(uint64_t run_seed, int split, Stream stream);

// Trains `method` with `params` (method and trainer keys) on `data`;
// `progress`, if set, is called after every step (bnn/train/trainer.h).
absl::StatusOr<Snapshot> TrainModel(const std::string& method,
                                    const ParamMap& params,
                                    const std::vector<int>& hidden_sizes,
                                    Activation activation, const Dataset& data,
                                    uint64_t seed,
                                    const ProgressCallback& progress = nullptr);

// A training run's loss at about `points` evenly spaced steps (and the
// last), for the JSON record: [[step, loss], ...].
class LossCurve {
 public:
  explicit LossCurve(int points = 100) : points_(points) {}
  // The callback for TrainModel; the curve must outlive the training.
  ProgressCallback Callback();
  Json ToJson() const;

 private:
  int points_;
  std::vector<std::pair<int64_t, double>> curve_;
};

// The result of one split: metrics in report order, the settings tuning
// chose and mode-specific details (tuning scores, estimator names, ...).
struct SplitOutcome {
  int split = 0;
  std::vector<std::pair<std::string, double>> metrics;
  ParamMap chosen;
  Json details = Json::object();
  double seconds = 0;
};

// `common.params` overridden by the grid point that maximises the mean
// validation score of `score` (see CrossValidate), or `common.params` alone
// without a grid. Records the choice and every grid point's scores in
// `outcome` under `score_name`.
absl::StatusOr<ParamMap> SelectParams(const CommonOptions& common,
                                      const Dataset& train, int split,
                                      const std::string& score_name,
                                      const FoldScore& score,
                                      SplitOutcome* outcome);

// --splits-state FILE, for runs longer than a session (a paper's full
// protocol): every finished split's outcome is kept in FILE, and the same
// command run again skips the splits FILE holds, so that a stopped run
// loses at most the splits it was computing. The file records the run's
// identity (the binary's provenance and every flag but --json-out,
// --threads and --splits-state: a split's numbers do not depend on the
// thread count); a file of another run is refused. Deleted when the run
// finishes.
struct SplitsState {
  std::string path;  // empty: none
  std::string identity;
  // --stop-after-splits N: stop with Aborted once N splits have been added
  // to the file in this run, as a preempted run would (for tests); 0: never.
  int stop_after = 0;
};
void DeclareSplitsStateFlag(FlagSet* flags);
absl::StatusOr<SplitsState> ParseSplitsState(const FlagSet& flags,
                                             const RunInfo& info);

// Runs fn(0) ... fn(num_splits - 1) on `threads` workers, each restricted to
// one OpenMP/Eigen thread (parallelism comes from the splits), skipping the
// splits `state` holds and adding each one that finishes to it. Progress
// goes to stderr. Returns the outcomes in split order, or the first error.
using SplitFn = std::function<absl::StatusOr<SplitOutcome>(int split)>;
absl::StatusOr<std::vector<SplitOutcome>> RunSplits(
    int num_splits, int threads, const SplitFn& fn,
    const SplitsState& state = {});

struct MetricSummary {
  double mean = 0;
  double se = 0;  // sample standard deviation / sqrt(n); 0 for one split
  std::vector<double> per_split;
};
// NaN entries (a metric undefined on a split) are left out of mean and se.
MetricSummary Summarize(const std::vector<double>& values);

// Prints a Markdown summary to stdout and writes the JSON record to
// `common.json_out` (if set): provenance, `config` (the mode's settings, to
// which the common flags are added; the mode records the architecture it
// resolved), wall time, every metric
// as {"mean", "se", "per_split"} and the per-split details.
absl::Status Report(const RunInfo& info, const CommonOptions& common,
                    const std::string& mode, const std::string& title,
                    Json config, const std::vector<SplitOutcome>& outcomes,
                    double wall_seconds);

// Seconds since `start` on a steady clock, for timing splits and runs.
double SecondsSince(const std::chrono::steady_clock::time_point& start);

}  // namespace bnn::experiment

#endif  // BNN_BENCH_ACCURACY_EXPERIMENT_H_
