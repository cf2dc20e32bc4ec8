// bnn-experiment uci: the UCI regression protocol of Hernandez-Lobato & Adams
// (2015) / Gal & Ghahramani (2016) as used by SLANG §9.4. Per split: tune the
// --tune grid (e.g. prior and noise precision) by K-fold cross-validation on
// the training split, scored by validation test log-likelihood; train on the
// whole training split with the chosen setting (the trainer standardises
// features and targets on it); report RMSE and test log-likelihood on the
// test split in original target units.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "bnn/random.h"
#include "bnn/status.h"

#include "bench/accuracy/data_splits.h"
#include "bench/accuracy/experiment.h"
#include "bench/accuracy/modes.h"
#include "bench/accuracy/scoring.h"

namespace bnn::experiment {

void DeclareUciFlags(FlagSet* flags) {
  // The reference code evaluates UCI with 20 samples; more samples make the
  // log-mean-exp estimate of the predictive less biased, at little cost.
  DeclareCommonFlags(100, flags);
  DeclareSplitsStateFlag(flags);
  flags->Flag("data-dir", "folder holding one sub-folder per UCI dataset")
      .Flag("dataset", "sub-folder name, e.g. boston");
}

absl::Status RunUci(const FlagSet& flags, const RunInfo& info) {
  const auto start = std::chrono::steady_clock::now();
  BNN_ASSIGN_OR_RETURN(const CommonOptions common, ParseCommonFlags(flags));
  BNN_ASSIGN_OR_RETURN(const std::string data_dir,
                       flags.GetRequired("data-dir"));
  BNN_ASSIGN_OR_RETURN(const std::string dataset, flags.GetRequired("dataset"));
  const std::string dir = absl::StrCat(data_dir, "/", dataset);
  BNN_ASSIGN_OR_RETURN(const SplitSource source, SplitSource::FromUciDir(dir));
  const int num_splits = common.max_splits > 0
                             ? std::min(common.max_splits, source.num_splits())
                             : source.num_splits();
  const std::vector<int> hidden = common.hidden_given
                                      ? common.hidden_sizes
                                      : std::vector<int>{source.n_hidden()};

  // With `details` (the final fit of a split, not a CV fold): the fitted
  // noise standard deviation (original units), the training-split RMSE and
  // the loss curve, to tell an unstable fit from a hard split.
  auto train_and_score =
      [&](const ParamMap& params, const Dataset& train, const Dataset& test,
          uint64_t train_seed, uint64_t predict_seed,
          Json* details) -> absl::StatusOr<RegressionScores> {
    LossCurve curve;
    BNN_ASSIGN_OR_RETURN(
        const Snapshot snapshot,
        TrainModel(common.method, params, hidden, common.activation, train,
                   train_seed,
                   details != nullptr ? curve.Callback() : nullptr));
    if (details != nullptr) {
      (*details)["train_seconds"] = snapshot.training.seconds;
      (*details)["noise_std"] = snapshot.standardization.target_std /
                                std::sqrt(snapshot.noise_precision);
      BNN_ASSIGN_OR_RETURN(
          const RegressionScores fit,
          ScoreRegression(snapshot, train, common.test_samples, predict_seed));
      (*details)["train_rmse"] = fit.rmse;
      (*details)["loss_curve"] = curve.ToJson();
    }
    return ScoreRegression(snapshot, test, common.test_samples, predict_seed);
  };

  const SplitFn run_split = [&](int k) -> absl::StatusOr<SplitOutcome> {
    SplitOutcome outcome;
    const Dataset train = source.Train(k);
    const Dataset test = source.Test(k);
    const FoldScore cv_test_ll = [&](const ParamMap& point, const Dataset& fit,
                                     const Dataset& validation,
                                     uint64_t seed) -> absl::StatusOr<double> {
      ParamMap params = common.params;
      for (const auto& [key, value] : point) params[key] = value;
      BNN_ASSIGN_OR_RETURN(const RegressionScores s,
                           train_and_score(params, fit, validation, seed,
                                           Rng(seed).Fork(1).seed(), nullptr));
      return s.test_ll;
    };
    BNN_ASSIGN_OR_RETURN(
        const ParamMap params,
        SelectParams(common, train, k, "cv_test_ll", cv_test_ll, &outcome));
    BNN_ASSIGN_OR_RETURN(
        const RegressionScores scores,
        train_and_score(
            params, train, test, StreamSeed(common.seed, k, Stream::kTraining),
            StreamSeed(common.seed, k, Stream::kPrediction), &outcome.details));
    outcome.metrics = {{"rmse", scores.rmse}, {"test_ll", scores.test_ll}};
    outcome.details["num_train"] = train.num_rows();
    outcome.details["num_test"] = test.num_rows();
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
  config["rows"] = source.all().num_rows();
  config["features"] = source.all().num_features;
  config["splits_available"] = source.num_splits();
  config["splits_used"] = num_splits;
  config["hidden_sizes"] = hidden;
  config["test_ll_units"] = "original target units, tau / target_std^2";
  return Report(info, common, "uci",
                absl::StrCat("uci · ", dataset, " · ", common.method),
                std::move(config), outcomes, SecondsSince(start));
}

}  // namespace bnn::experiment
