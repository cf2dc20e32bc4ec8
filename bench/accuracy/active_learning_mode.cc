// bnn-experiment active-learning: the active-learning protocol of NNG §5.3 /
// App. C.3 (Zhang et al. 2018, Tables 3 and 4), after PBP
// (Hernandez-Lobato & Adams 2015).
//
// Per trial (a "split" of the report):
//   * partition: with --partition all (default, the paper's protocol:
//     "we splited each dataset into training and test sets with 20 and 100
//     data points. All remaining data were included in pool sets") a seeded
//     shuffle of every row of data.txt gives --initial training rows,
//     --test-points test rows and the rest is the pool. The UCI 90/10 test
//     splits are too small for 100 test points on boston (51 rows), energy
//     (77) and yacht (31), hence not the default; --partition uci draws the
//     initial rows from split k's training rows, up to --test-points test
//     rows from its test rows, and pools the remaining training rows.
//   * rounds: fit the method FROM SCRATCH on the labelled rows (round r uses
//     its own training seed, identical across acquisitions so that round 0
//     is the same model for max_variance and random) and score the test
//     rows (RMSE and test log-likelihood in original target units,
//     --test-samples posterior samples; the paper used 1000); then move one
//     pool row to the labelled set, chosen by bnn::Acquire (core acquisition
//     API) with heuristic max_variance (largest epistemic predictive
//     variance; the information-gain criterion under i.i.d. Gaussian noise)
//     or random. --rounds R acquisitions give R + 1 fits and a final
//     training set of --initial + R rows. (The paper's "repeated 10 times,
//     that is, we collected 9 points" is --rounds 9.)
//   * reference (Table 4, optional): with --reference hmc, HMC is trained on
//     the initial labelled rows (the paper's Table 4 trial: 20 labelled
//     points, 100 unlabelled) and on the final labelled rows; the Pearson
//     correlation between the method's and HMC's epistemic predictive
//     variances on the test rows is reported as pearson_hmc_initial and
//     pearson_hmc. Adding a constant aleatoric variance would not change it.
//     The reference targets the same posterior as the method: the method's
//     prior precisions and its fitted noise precision (E_q[tau] of the
//     snapshot, standardised units; HMC keeps tau fixed) unless
//     --reference-params overrides them. With --reference-dir the reference
//     is shared instead: its settings come from its defaults and
//     --reference-params alone (noise_precision must be given), and each
//     split's and stage's reference snapshot is read from the folder if an
//     earlier run (of any method) trained it on the same rows with the same
//     settings and seed, or trained and written there: one reference run per
//     dataset, split and stage serves every method.
//
// Metrics: rmse and test_ll of the final fit (Table 3 reports the test RMSE
// after the last acquisition), rmse_initial (round 0), rmse_mean_rounds (the
// mean over all R + 1 fits: Table 3's "average test RMSE" may also be read
// so) and the Pearson correlations. Every round's RMSE, acquired row and
// score are in the split details.
//
// Hyperparameters (nng.md §4.1, §6.3). The NNG methods (noisy_adam,
// noisy_kfac, nng_full) default to the paper's regression noise model, a
// Gaussian likelihood with a Gamma(a0 = 6, b0 = 6) prior on the precision
// tau and a fitted Gamma q(tau) whose mean E_q[tau] the predictive uses
// (noise_model=gamma; noise_shape = noise_rate = 6 are the option
// defaults), and to C.3's beta~ = 0.01; alpha~ = 0.01, gamma_ex = 0 and
// lambda = 1 are already NngOptions' defaults. --param overrides each. The
// other methods (bbb, hmc, ...) only offer a fixed noise_precision, which
// must then be given. Epochs are left to --param epochs (C.3 trains 20000).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

#include "bnn/format.h"
#include "bnn/io/snapshot.h"
#include "bnn/methods/registry.h"
#include "bnn/predict/acquisition.h"
#include "bnn/predict/predictor.h"
#include "bnn/random.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "bench/accuracy/data_splits.h"
#include "bench/accuracy/experiment.h"
#include "bench/accuracy/modes.h"
#include "bench/accuracy/scoring.h"

namespace bnn::experiment {
namespace {

// C.3: "a neural network with one hidden layer and 10 hidden units".
constexpr int kDefaultHidden = 10;

// Sub-streams of a trial's training stream (Stream::kTraining): round r
// trains with Fork(r); the partition uses a tag far above any round.
constexpr uint64_t kPartitionTag = 0x7061727469ULL;  // "parti"
// Sub-streams of the prediction stream: test predictive of round r uses
// Fork(r), the acquisition of round r Fork(kAcquireTag + r) and the
// variances compared with the reference Fork(kVarianceTag + stage).
constexpr uint64_t kAcquireTag = 1 << 20;
constexpr uint64_t kVarianceTag = 2 << 20;

bool IsNngMethod(const std::string& method) {
  return method == "noisy_adam" || method == "noisy_kfac" ||
         method == "nng_blktri" || method == "nng_full";
}

// noisy_kfac and nng_blktri put one spherical prior on every weight, biases
// included (NngOptions), whatever their bias_prior_precision says.
bool HasOneSphericalPrior(const std::string& method) {
  return method == "noisy_kfac" || method == "nng_blktri";
}

// The protocol's defaults for `method`, applied where --param is silent
// (see the file comment).
ParamMap MethodDefaults(const std::string& method) {
  if (!IsNngMethod(method)) return {};
  return {{"noise_model", "gamma"}, {"beta", "0.01"}};
}

// HMC settings cheap enough to run twice per trial on <= 30 points and a
// 10-unit net: 4 chains x (1000 adaptation + 4000 kept-every-4th
// iterations) of 20 leapfrog steps, 1000 samples per chain. The paper ran
// 20 chains x 100000 iterations; --reference-params overrides.
ParamMap ReferenceDefaults(const std::string& reference) {
  if (reference != "hmc") return {};
  return {{"chains", "4"},
          {"warmup", "1000"},
          {"thin", "4"},
          {"leapfrog_steps", "20"},
          {"epochs", "5000"}};
}

// The reference's parameters for a method snapshot: its defaults, the
// method's priors and fitted noise precision (if the reference has such
// options; not for a shared reference, `shared`), then the user's
// overrides.
ParamMap ReferenceParams(const std::string& reference, const Snapshot& method,
                         const ParamMap& overrides, bool shared) {
  ParamMap params = ReferenceDefaults(reference);
  const ParamMap& m = method.params;  // canonical: every option is present
  if (auto it = m.find("prior_precision"); it != m.end() && !shared) {
    params["prior_precision"] = it->second;
    params["bias_prior_precision"] = it->second;
  }
  if (auto it = m.find("bias_prior_precision");
      it != m.end() && !shared && !HasOneSphericalPrior(method.method)) {
    params["bias_prior_precision"] = it->second;
  }
  // Round-trip precision, so the reference uses exactly this tau.
  if (!shared)
    params["noise_precision"] = ShortestDouble(method.noise_precision);
  for (const auto& [key, value] : overrides) params[key] = value;
  return params;
}

// 64-bit FNV-1a of `text`: names a shared reference's file after what it
// was trained on (stable across runs and builds, unlike std::hash).
uint64_t Fnv1a(absl::string_view text) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// Pearson's correlation; NaN when a vector is constant or sizes differ.
double PearsonCorrelation(const std::vector<double>& a,
                          const std::vector<double>& b) {
  const size_t n = a.size();
  if (n < 2 || b.size() != n) return std::nan("");
  const double mean_a = std::accumulate(a.begin(), a.end(), 0.0) / n;
  const double mean_b = std::accumulate(b.begin(), b.end(), 0.0) / n;
  double cov = 0, var_a = 0, var_b = 0;
  for (size_t i = 0; i < n; ++i) {
    cov += (a[i] - mean_a) * (b[i] - mean_b);
    var_a += (a[i] - mean_a) * (a[i] - mean_a);
    var_b += (b[i] - mean_b) * (b[i] - mean_b);
  }
  if (var_a <= 0 || var_b <= 0) return std::nan("");
  return cov / std::sqrt(var_a * var_b);
}

// Epistemic predictive variances of `snapshot` on the rows of `data`.
absl::StatusOr<std::vector<double>> EpistemicVariances(const Snapshot& snapshot,
                                                       const Dataset& data,
                                                       int num_samples,
                                                       uint64_t seed) {
  BNN_ASSIGN_OR_RETURN(
      const std::unique_ptr<Predictor> predictor,
      Predictor::Create(std::make_shared<const Snapshot>(snapshot)));
  PredictOptions options;
  options.num_samples = num_samples;
  options.seed = seed;
  BNN_ASSIGN_OR_RETURN(
      Prediction prediction,
      predictor->Predict(data.features, data.num_rows(), options));
  return std::move(prediction.epistemic_variance);
}

// One trial's rows. Indices refer to `labelled_base` (every row of the
// dataset, or split k's training rows with --partition uci).
struct Trial {
  Dataset labelled_base;
  std::vector<int64_t> initial;
  std::vector<int64_t> pool;
  Dataset test;
  std::vector<int64_t> test_rows;  // for the record; indices as documented
};

std::vector<int64_t> Shuffled(int64_t n, Rng& rng) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng.engine());
  return order;
}

}  // namespace

void DeclareActiveLearningFlags(FlagSet* flags) {
  // C.3: "1000 sampled weights for predicting on the testing set".
  DeclareCommonFlags(1000, flags);
  DeclareSplitsStateFlag(flags);
  flags->Flag("data-dir", "folder holding one sub-folder per UCI dataset")
      .Flag("dataset", "sub-folder name, e.g. boston")
      .Flag("acquisition", "max_variance or random", "max_variance")
      .Flag("rounds", "acquisitions (fits = rounds + 1)", "10")
      .Flag("initial", "labelled rows before the first acquisition", "20")
      .Flag("test-points", "test rows per trial", "100")
      .Flag("partition",
            "all: initial/test/pool drawn from every row (the paper); uci: "
            "initial and pool from split k's training rows, test from its "
            "test rows",
            "all")
      .Flag("acquire-samples", "posterior samples scoring the pool", "1000")
      .Flag("reference",
            "method whose predictive variances the Pearson correlation is "
            "measured against (Table 4), e.g. hmc; none disables",
            "none")
      .RepeatableFlag("reference-params",
                      "k=v[,k=v...] for the reference (default: 4 chains, "
                      "1000 warm-up + 4000 iterations for hmc; the method's "
                      "priors and fitted noise precision)")
      .Flag("reference-dir",
            "folder of shared reference snapshots: each split's reference is "
            "read from it when an earlier run trained it on the same rows with "
            "the same settings and seed, else trained and written there, so "
            "one reference run serves every method; its settings are then the "
            "reference's defaults and --reference-params alone, which must "
            "give noise_precision; empty: a reference per run with the "
            "method's priors and fitted tau",
            "");
}

absl::Status RunActiveLearning(const FlagSet& flags, const RunInfo& info) {
  const auto start = std::chrono::steady_clock::now();
  BNN_ASSIGN_OR_RETURN(CommonOptions common, ParseCommonFlags(flags));
  if (!common.grid.empty()) {
    return absl::InvalidArgumentError(
        "active-learning does not tune: the labelled set is too small for "
        "cross-validation; give settings with --param");
  }
  BNN_ASSIGN_OR_RETURN(const std::string data_dir,
                       flags.GetRequired("data-dir"));
  BNN_ASSIGN_OR_RETURN(const std::string dataset, flags.GetRequired("dataset"));
  BNN_ASSIGN_OR_RETURN(const AcquisitionHeuristic heuristic,
                       StringToHeuristic(flags.Get("acquisition")));
  if (heuristic != AcquisitionHeuristic::kMaxVariance &&
      heuristic != AcquisitionHeuristic::kRandom) {
    return absl::InvalidArgumentError(
        absl::StrCat("--acquisition = '", flags.Get("acquisition"),
                     "': regression supports max_variance or random"));
  }
  BNN_ASSIGN_OR_RETURN(const int64_t rounds_flag,
                       flags.GetInt("rounds", 0, 100000));
  BNN_ASSIGN_OR_RETURN(const int64_t initial_flag,
                       flags.GetInt("initial", 2, 1 << 24));
  BNN_ASSIGN_OR_RETURN(const int64_t test_points_flag,
                       flags.GetInt("test-points", 2, 1 << 24));
  BNN_ASSIGN_OR_RETURN(const int64_t acquire_samples_flag,
                       flags.GetInt("acquire-samples", 1, 4096));
  const int rounds = static_cast<int>(rounds_flag);
  const int initial = static_cast<int>(initial_flag);
  const int test_points = static_cast<int>(test_points_flag);
  const int acquire_samples = static_cast<int>(acquire_samples_flag);
  const std::string partition = flags.Get("partition");
  if (partition != "all" && partition != "uci") {
    return absl::InvalidArgumentError(
        absl::StrCat("--partition = '", partition, "': use all or uci"));
  }

  // Protocol defaults where --param is silent; checked like the user's.
  ParamMap applied_defaults;
  for (const auto& [key, value] : MethodDefaults(common.method)) {
    if (common.params.emplace(key, value).second) {
      applied_defaults[key] = value;
    }
  }
  const MethodRegistry& registry = MethodRegistry::Builtin();
  BNN_RETURN_IF_ERROR(
      registry.Validate(common.method, common.params, TrainerParamNames()));

  BNN_ASSIGN_OR_RETURN(ReferenceFlags parsed, ParseReferenceFlags(flags));
  const std::string reference = std::move(parsed.method);
  ParamMap reference_overrides = std::move(parsed.overrides);
  if (!reference.empty()) {
    ParamMap check = ReferenceDefaults(reference);
    for (const auto& [key, value] : reference_overrides) check[key] = value;
    BNN_RETURN_IF_ERROR(
        registry.Validate(reference, check, TrainerParamNames()));
  }

  const std::string reference_dir = flags.Get("reference-dir");
  if (!reference_dir.empty()) {
    if (reference.empty()) {
      return absl::InvalidArgumentError(
          "--reference-dir needs --reference (e.g. hmc)");
    }
    if (reference_overrides.count("noise_precision") == 0) {
      return absl::InvalidArgumentError(
          "--reference-dir: give noise_precision in --reference-params; a "
          "shared reference cannot use each method's fitted tau");
    }
  }

  const std::string dir = absl::StrCat(data_dir, "/", dataset);
  BNN_ASSIGN_OR_RETURN(const SplitSource source, SplitSource::FromUciDir(dir));
  const Dataset& all = source.all();
  if (all.task != Task::kRegression) {
    return absl::InvalidArgumentError("active-learning is for regression");
  }
  if (partition == "all" &&
      all.num_rows() < int64_t{initial} + test_points + rounds) {
    return absl::InvalidArgumentError(
        absl::StrCat(dataset, " has ", all.num_rows(), " rows; --initial ",
                     initial, " + --test-points ", test_points, " + --rounds ",
                     rounds, " need more"));
  }
  // With --partition all a trial is a fresh random partition, so any number
  // of trials is possible; the default is the folder's split count.
  int num_splits = source.num_splits();
  if (common.max_splits > 0) {
    num_splits = partition == "all"
                     ? common.max_splits
                     : std::min(common.max_splits, source.num_splits());
  }
  const std::vector<int> hidden = common.hidden_given
                                      ? common.hidden_sizes
                                      : std::vector<int>{kDefaultHidden};

  auto make_trial = [&](int k) -> absl::StatusOr<Trial> {
    Trial trial;
    Rng rng =
        Rng(StreamSeed(common.seed, k, Stream::kTraining)).Fork(kPartitionTag);
    if (partition == "all") {
      const std::vector<int64_t> order = Shuffled(all.num_rows(), rng);
      trial.labelled_base = all;
      trial.initial.assign(order.begin(), order.begin() + initial);
      trial.test_rows.assign(order.begin() + initial,
                             order.begin() + initial + test_points);
      trial.pool.assign(order.begin() + initial + test_points, order.end());
      trial.test = all.Subset(trial.test_rows);
      return trial;
    }
    trial.labelled_base = source.Train(k);
    const int64_t n = trial.labelled_base.num_rows();
    if (n < int64_t{initial} + rounds) {
      return absl::InvalidArgumentError(
          absl::StrCat("split ", k, " has ", n, " training rows; --initial ",
                       initial, " + --rounds ", rounds, " need more"));
    }
    const std::vector<int64_t> order = Shuffled(n, rng);
    trial.initial.assign(order.begin(), order.begin() + initial);
    trial.pool.assign(order.begin() + initial, order.end());
    const Dataset split_test = source.Test(k);
    std::vector<int64_t> test_order = Shuffled(split_test.num_rows(), rng);
    if (static_cast<int64_t>(test_order.size()) > test_points) {
      test_order.resize(test_points);
    }
    trial.test_rows = test_order;
    trial.test = split_test.Subset(test_order);
    return trial;
  };

  // Pearson correlation of the variances of `snapshot` and of the reference
  // trained on the same rows; `stage` 0 = initial rows, 1 = final rows.
  // The reference trained on `train` (rows `rows` of the trial's labelled
  // base), or with --reference-dir the shared one: read if present, else
  // trained and written. Its file name hashes everything it depends on.
  auto train_reference = [&](const ParamMap& params, const Dataset& train,
                             const std::vector<int64_t>& rows, int k, int stage,
                             Json* record) -> absl::StatusOr<Snapshot> {
    const uint64_t seed =
        Rng(StreamSeed(common.seed, k, Stream::kReference)).Fork(stage).seed();
    if (reference_dir.empty()) {
      return TrainModel(reference, params, hidden, common.activation, train,
                        seed);
    }
    std::string key = absl::StrCat(reference, "|", dataset, "|", partition, "|",
                                   k, "|", stage, "|", seed, "|",
                                   static_cast<int>(common.activation), "|");
    for (int h : hidden) absl::StrAppend(&key, h, ",");
    for (const auto& [name, value] : params) {
      absl::StrAppend(&key, "|", name, "=", value);
    }
    absl::StrAppend(&key, "|rows");
    for (int64_t row : rows) absl::StrAppend(&key, ",", row);
    const std::string path =
        absl::StrFormat("%s/%s_split%d_stage%d_%016x.bnnsnap", reference_dir,
                        dataset, k, stage, Fnv1a(key));
    (*record)["reference_file"] = path;
    if (std::ifstream(path).good()) {
      (*record)["reference_reused"] = true;
      return ReadSnapshotFile(path);
    }
    (*record)["reference_reused"] = false;
    BNN_ASSIGN_OR_RETURN(
        Snapshot ref,
        TrainModel(reference, params, hidden, common.activation, train, seed));
    BNN_RETURN_IF_ERROR(WriteSnapshotFile(path, ref));
    return ref;
  };

  auto reference_pearson = [&](const Snapshot& snapshot, const Dataset& train,
                               const std::vector<int64_t>& rows,
                               const Dataset& test, int k, int stage,
                               Json* record) -> absl::StatusOr<double> {
    const ParamMap params = ReferenceParams(
        reference, snapshot, reference_overrides, !reference_dir.empty());
    BNN_ASSIGN_OR_RETURN(
        const Snapshot ref,
        train_reference(params, train, rows, k, stage, record));
    const uint64_t seed = Rng(StreamSeed(common.seed, k, Stream::kPrediction))
                              .Fork(kVarianceTag + stage)
                              .seed();
    BNN_ASSIGN_OR_RETURN(
        const std::vector<double> method_var,
        EpistemicVariances(snapshot, test, common.test_samples, seed));
    BNN_ASSIGN_OR_RETURN(
        const std::vector<double> reference_var,
        EpistemicVariances(ref, test, common.test_samples, seed));
    BNN_ASSIGN_OR_RETURN(const RegressionScores ref_scores,
                         ScoreRegression(ref, test, common.test_samples, seed));
    const double rho = PearsonCorrelation(method_var, reference_var);
    (*record)["train_rows"] = train.num_rows();
    (*record)["pearson"] = rho;
    (*record)["reference_rmse"] = ref_scores.rmse;
    (*record)["reference_noise_precision"] = ref.noise_precision;
    (*record)["reference_seconds"] = ref.training.seconds;
    (*record)["method_mean_variance"] =
        std::accumulate(method_var.begin(), method_var.end(), 0.0) /
        method_var.size();
    (*record)["reference_mean_variance"] =
        std::accumulate(reference_var.begin(), reference_var.end(), 0.0) /
        reference_var.size();
    return rho;
  };

  const SplitFn run_split = [&](int k) -> absl::StatusOr<SplitOutcome> {
    SplitOutcome outcome;
    BNN_ASSIGN_OR_RETURN(const Trial trial, make_trial(k));
    const Dataset& base = trial.labelled_base;
    std::vector<int64_t> labelled = trial.initial;
    std::vector<int64_t> pool = trial.pool;
    const Rng train_stream(StreamSeed(common.seed, k, Stream::kTraining));
    const Rng predict_stream(StreamSeed(common.seed, k, Stream::kPrediction));

    Json round_records = Json::array();
    std::vector<int64_t> acquired;
    std::vector<double> round_rmse;
    RegressionScores last{};
    double pearson_initial = std::nan(""), pearson_final = std::nan("");
    Json reference_records = Json::object();
    for (int r = 0;; ++r) {
      const Dataset train = base.Subset(labelled);
      BNN_ASSIGN_OR_RETURN(
          const Snapshot snapshot,
          TrainModel(common.method, common.params, hidden, common.activation,
                     train, train_stream.Fork(r).seed()));
      BNN_ASSIGN_OR_RETURN(
          last, ScoreRegression(snapshot, trial.test, common.test_samples,
                                predict_stream.Fork(r).seed()));
      round_rmse.push_back(last.rmse);
      Json record;
      record["round"] = r;
      record["train_rows"] = train.num_rows();
      record["rmse"] = last.rmse;
      record["test_ll"] = last.test_ll;
      record["noise_precision"] = snapshot.noise_precision;
      record["train_seconds"] = snapshot.training.seconds;
      if (!reference.empty() && (r == 0 || r == rounds)) {
        // Round 0 is also the final round when --rounds 0: one reference
        // (the same rows) gives both correlations.
        if (r == 0) {
          Json ref;
          BNN_ASSIGN_OR_RETURN(pearson_initial,
                               reference_pearson(snapshot, train, labelled,
                                                 trial.test, k, 0, &ref));
          if (rounds == 0) {
            pearson_final = pearson_initial;
            reference_records["final"] = ref;
          }
          reference_records["initial"] = std::move(ref);
        }
        if (r == rounds && rounds > 0) {
          Json ref;
          BNN_ASSIGN_OR_RETURN(pearson_final,
                               reference_pearson(snapshot, train, labelled,
                                                 trial.test, k, 1, &ref));
          reference_records["final"] = std::move(ref);
        }
      }
      if (r == rounds) {
        round_records.push_back(std::move(record));
        break;
      }

      // Score the pool with this round's model and label the best row.
      std::vector<double> pool_rows;
      pool_rows.reserve(pool.size() * base.num_features);
      for (int64_t row : pool) {
        pool_rows.insert(pool_rows.end(), base.row(row),
                         base.row(row) + base.num_features);
      }
      BNN_ASSIGN_OR_RETURN(
          const std::unique_ptr<Predictor> predictor,
          Predictor::Create(std::make_shared<const Snapshot>(snapshot)));
      AcquireOptions options;
      options.k = 1;
      options.heuristic = heuristic;
      options.num_samples = acquire_samples;
      options.seed = predict_stream.Fork(kAcquireTag + r).seed();
      BNN_ASSIGN_OR_RETURN(
          const Acquisition acquisition,
          Acquire(*predictor, SpanPool(pool_rows, base.num_features), options));
      const int64_t position = acquisition.indices.at(0);
      const int64_t row = pool[position];
      record["acquired_row"] = row;
      record["acquired_score"] = acquisition.scores.at(0);
      round_records.push_back(std::move(record));
      acquired.push_back(row);
      labelled.push_back(row);
      pool.erase(pool.begin() + position);
    }

    double rmse_sum = 0;
    for (double v : round_rmse) rmse_sum += v;
    outcome.metrics = {{"rmse", last.rmse},
                       {"test_ll", last.test_ll},
                       {"rmse_initial", round_rmse.front()},
                       {"rmse_mean_rounds", rmse_sum / round_rmse.size()}};
    if (!reference.empty()) {
      outcome.metrics.emplace_back(absl::StrCat("pearson_", reference),
                                   pearson_final);
      outcome.metrics.emplace_back(
          absl::StrCat("pearson_", reference, "_initial"), pearson_initial);
      outcome.details["reference"] = std::move(reference_records);
    }
    outcome.details["num_train_initial"] = trial.initial.size();
    outcome.details["num_train_final"] = labelled.size();
    outcome.details["num_test"] = trial.test.num_rows();
    outcome.details["num_pool_initial"] = trial.pool.size();
    outcome.details["initial_rows"] = trial.initial;
    outcome.details["test_rows"] = trial.test_rows;
    outcome.details["acquired_rows"] = acquired;
    outcome.details["rounds"] = std::move(round_records);
    return outcome;
  };

  BNN_ASSIGN_OR_RETURN(const SplitsState splits_state,
                       ParseSplitsState(flags, info));
  BNN_ASSIGN_OR_RETURN(
      const std::vector<SplitOutcome> outcomes,
      RunSplits(num_splits, common.threads, run_split, splits_state));
  Json config;
  config["data_dir"] = data_dir;
  config["dataset"] = dataset;
  config["rows"] = all.num_rows();
  config["features"] = all.num_features;
  config["partition"] = partition;
  config["row_indices"] = partition == "all"
                              ? "rows of data.txt"
                              : "initial/pool/acquired: split k's training "
                                "rows; test: split k's test rows";
  config["splits_available"] = source.num_splits();
  config["splits_used"] = num_splits;
  config["acquisition"] = std::string(HeuristicToString(heuristic));
  config["rounds"] = rounds;
  config["initial"] = initial;
  config["test_points"] = test_points;
  config["acquire_samples"] = acquire_samples;
  config["hidden_sizes"] = hidden;
  Json defaults = Json::object();
  for (const auto& [key, value] : applied_defaults) defaults[key] = value;
  config["protocol_defaults"] = std::move(defaults);
  config["reference"] = reference.empty() ? "none" : reference;
  if (!reference.empty()) {
    Json ref = Json::object();
    for (const auto& [key, value] : ReferenceDefaults(reference)) {
      ref[key] = value;
    }
    for (const auto& [key, value] : reference_overrides) ref[key] = value;
    config["reference_params"] = std::move(ref);
    config["reference_dir"] = reference_dir;
    config["reference_priors"] =
        reference_dir.empty()
            ? "the method's prior precisions and fitted noise precision "
              "unless overridden"
            : "shared: the reference's defaults and --reference-params "
              "alone, the same for every method";
  }
  config["conventions"] =
      "rmse/test_ll: final fit, original target units; rmse_mean_rounds: "
      "mean over the rounds + 1 fits; pearson_*: epistemic predictive "
      "variances on the test rows";
  return Report(
      info, common, "active-learning",
      absl::StrCat("active-learning · ", dataset, " · ", common.method, " · ",
                   HeuristicToString(heuristic)),
      std::move(config), outcomes, SecondsSince(start));
}

}  // namespace bnn::experiment
