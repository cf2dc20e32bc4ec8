// bnn-experiment logreg: SLANG's Bayesian logistic-regression protocol
// (Mishkin et al. 2018, Sec. 4.1, App. E, Tables 1/6/7). Per split (20 seeded
// 50/50 partitions of one CSV, or a given test file): train the method on raw
// features (the prior is stated for LIBSVM's [-1, 1] scaling), then measure
//   neg_elbo  -ELBO / N_train (quadrature for Gaussian posteriors),
//   nll       test log-loss of the MC predictive, nats,
//   accuracy, ece, auroc,
//   sym_kl    (KL(q||p) + KL(p||q)) / 2 to the Full-Gaussian Exact posterior
//             trained on the same split with the same priors (Gaussian q),
//   var_spearman / var_log_ratio  marginal variances against that reference
//             (the paper's Figs. 1 and 7: MF shrinks, SLANG tracks).
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include "bnn/methods/registry.h"
#include "bnn/posterior/posterior.h"
#include "bnn/predict/evaluation.h"
#include "bnn/random.h"
#include "bnn/status.h"
#include "bnn/train/trainer.h"

#include "bench/accuracy/data_splits.h"
#include "bench/accuracy/experiment.h"
#include "bench/accuracy/modes.h"
#include "bench/accuracy/scoring.h"

namespace bnn::experiment {
namespace {

// SLANG §9.1: 20 random halves.
constexpr int kDefaultSplits = 20;
// exact_methods run 500 L-BFGS "epochs" in the reference code.
constexpr int kReferenceEpochs = 500;

// The reference's priors must be the method's: read them from the trained
// snapshot, where every option is printed in canonical form (a method's
// defaults differ between methods).
ParamMap ReferenceParams(const Snapshot& snapshot, const ParamMap& method,
                         const ParamMap& overrides) {
  ParamMap params;
  for (const char* key : {"prior_precision", "bias_prior_precision"}) {
    if (auto it = snapshot.params.find(key); it != snapshot.params.end()) {
      params[key] = it->second;
    }
  }
  params["epochs"] = absl::StrCat(kReferenceEpochs);
  params["standardize"] = method.at("standardize");
  for (const auto& [key, value] : overrides) params[key] = value;
  return params;
}

// The bias of a model without hidden layers: the last column of its block.
int64_t BiasIndex(const Snapshot& snapshot) {
  const LayerShape layer = snapshot.model.Layers()[0];
  return layer.Index(0, layer.in);
}

}  // namespace

void DeclareLogregFlags(FlagSet* flags) {
  // Paper: 1,000 MC samples for MNIST; LR unstated (slang.md §9.6).
  DeclareCommonFlags(1000, flags);
  DeclareSplitsStateFlag(flags);
  flags->Flag("csv", "training CSV (header; one label column)")
      .Flag("test-csv",
            "test CSV with the same columns; without it the "
            "splits are random partitions of --csv")
      .Flag("target", "label column (name or 0-based index)", "label")
      .Flag("train-fraction", "training share of a random partition", "0.5")
      .Flag("elbo-samples",
            "Monte Carlo samples of the ELBO when no quadrature applies",
            "1000")
      .Flag("reference", "posterior the KL is measured to; none disables",
            "exact_full")
      .RepeatableFlag("reference-params",
                      "k=v[,k=v...] for the reference (default: the method's "
                      "priors, epochs=500)");
}

absl::Status RunLogreg(const FlagSet& flags, const RunInfo& info) {
  const auto start = std::chrono::steady_clock::now();
  BNN_ASSIGN_OR_RETURN(CommonOptions common, ParseCommonFlags(flags));
  // Raw features unless asked otherwise (SLANG states the prior for them).
  common.params.emplace("standardize", "false");
  BNN_ASSIGN_OR_RETURN(const std::string csv, flags.GetRequired("csv"));
  const std::string test_csv = flags.Get("test-csv");
  BNN_ASSIGN_OR_RETURN(const int64_t elbo_samples,
                       flags.GetInt("elbo-samples", 2, 1 << 20));
  double train_fraction = 0;
  if (!absl::SimpleAtod(flags.Get("train-fraction"), &train_fraction) ||
      !(train_fraction > 0 && train_fraction < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--train-fraction = '",
                                                   flags.Get("train-fraction"),
                                                   "' must be in (0, 1)"));
  }
  BNN_ASSIGN_OR_RETURN(ReferenceFlags parsed, ParseReferenceFlags(flags));
  std::string reference = std::move(parsed.method);
  ParamMap reference_overrides = std::move(parsed.overrides);
  // A reference needs a model it can represent: no hidden layers.
  if (!common.hidden_sizes.empty()) reference.clear();
  if (!reference.empty()) {
    BNN_RETURN_IF_ERROR(MethodRegistry::Builtin().Validate(
        reference, reference_overrides, TrainerParamNames()));
  }

  BNN_ASSIGN_OR_RETURN(
      const LabeledCsv data,
      ReadClassificationCsv(csv, test_csv, flags.Get("target")));
  absl::StatusOr<SplitSource> source_or =
      data.has_test
          ? SplitSource::Fixed(data.train, data.test)
          : SplitSource::RandomPartitions(
                data.train,
                common.max_splits > 0 ? common.max_splits : kDefaultSplits,
                train_fraction, common.seed);
  BNN_RETURN_IF_ERROR(source_or.status());
  const SplitSource& source = *source_or;
  const int num_splits = common.max_splits > 0
                             ? std::min(common.max_splits, source.num_splits())
                             : source.num_splits();

  auto train = [&](const ParamMap& params, const Dataset& rows, uint64_t seed) {
    return TrainModel(common.method, params, common.hidden_sizes,
                      common.activation, rows, seed);
  };

  const SplitFn run_split = [&](int k) -> absl::StatusOr<SplitOutcome> {
    SplitOutcome outcome;
    const Dataset train_rows = source.Train(k);
    const Dataset test_rows = source.Test(k);
    const FoldScore cv_neg_log_loss =
        [&](const ParamMap& point, const Dataset& fit,
            const Dataset& validation,
            uint64_t seed) -> absl::StatusOr<double> {
      ParamMap params = common.params;
      for (const auto& [key, value] : point) params[key] = value;
      BNN_ASSIGN_OR_RETURN(const Snapshot snapshot, train(params, fit, seed));
      BNN_ASSIGN_OR_RETURN(
          const ClassificationScores s,
          ScoreClassification(snapshot, validation, common.test_samples,
                              Rng(seed).Fork(1).seed()));
      return -s.nll;
    };
    BNN_ASSIGN_OR_RETURN(const ParamMap params,
                         SelectParams(common, train_rows, k, "cv_neg_log_loss",
                                      cv_neg_log_loss, &outcome));
    BNN_ASSIGN_OR_RETURN(const Snapshot snapshot,
                         train(params, train_rows,
                               StreamSeed(common.seed, k, Stream::kTraining)));
    BNN_ASSIGN_OR_RETURN(
        const NegativeElbo elbo,
        NegativeElboPerExample(snapshot, train_rows,
                               static_cast<int>(elbo_samples),
                               StreamSeed(common.seed, k, Stream::kElbo)));
    BNN_ASSIGN_OR_RETURN(
        const ClassificationScores scores,
        ScoreClassification(snapshot, test_rows, common.test_samples,
                            StreamSeed(common.seed, k, Stream::kPrediction)));
    outcome.metrics = {{"neg_elbo", elbo.per_example},
                       {"nll", scores.nll},
                       {"accuracy", scores.accuracy},
                       {"ece", scores.ece},
                       {"auroc", scores.auroc}};
    outcome.details["neg_elbo_estimator"] = elbo.estimator;
    if (elbo.standard_error > 0) {
      outcome.details["neg_elbo_se"] = elbo.standard_error;
    }
    outcome.details["train_seconds"] = snapshot.training.seconds;
    if (common.hidden_sizes.empty()) {
      const int64_t bias = BiasIndex(snapshot);
      outcome.details["bias_mean"] = snapshot.posterior->mean()[bias];
      outcome.details["bias_variance"] =
          snapshot.posterior->MarginalVariances()[bias];
    }

    if (!reference.empty()) {
      const ParamMap reference_params =
          ReferenceParams(snapshot, params, reference_overrides);
      BNN_ASSIGN_OR_RETURN(
          const Snapshot exact,
          TrainModel(reference, reference_params, {}, common.activation,
                     train_rows,
                     StreamSeed(common.seed, k, Stream::kReference)));
      absl::StatusOr<double> kl =
          SymmetricKl(*snapshot.posterior, *exact.posterior);
      // Families without a Gaussian density (samples, dropout) have no KL.
      if (!kl.ok() && !absl::IsUnimplemented(kl.status())) return kl.status();
      if (kl.ok()) outcome.metrics.emplace_back("sym_kl", *kl);
      const VarianceAgreement agreement =
          CompareMarginalVariances(*snapshot.posterior, *exact.posterior);
      outcome.metrics.emplace_back("var_spearman", agreement.spearman);
      outcome.metrics.emplace_back("var_log_ratio", agreement.mean_log_ratio);
      outcome.details["reference_seconds"] = exact.training.seconds;
      outcome.details["reference_bias_variance"] =
          exact.posterior->MarginalVariances()[BiasIndex(exact)];
    }
    return outcome;
  };

  BNN_ASSIGN_OR_RETURN(const SplitsState splits_state,
                       ParseSplitsState(flags, info));
  BNN_ASSIGN_OR_RETURN(
      const std::vector<SplitOutcome> outcomes,
      RunSplits(num_splits, common.threads, run_split, splits_state));
  Json config;
  config["csv"] = csv;
  if (!test_csv.empty()) config["test_csv"] = test_csv;
  config["target"] = flags.Get("target");
  config["rows"] = source.all().num_rows();
  config["features"] = source.all().num_features;
  config["class_values"] = source.all().class_values;
  config["train_fraction"] = data.has_test ? 0.0 : train_fraction;
  config["splits_used"] = num_splits;
  config["hidden_sizes"] = common.hidden_sizes;
  config["reference"] = reference.empty() ? "none" : reference;
  if (!reference.empty()) {
    Json overrides = Json::object();
    for (const auto& [k, v] : reference_overrides) overrides[k] = v;
    config["reference_overrides"] = std::move(overrides);
  }
  config["conventions"] =
      "neg_elbo = -ELBO / N_train; nll in nats; sym_kl = (KL(q||p) + "
      "KL(p||q)) / 2";
  const std::string name = csv.substr(csv.find_last_of('/') == std::string::npos
                                          ? 0
                                          : csv.find_last_of('/') + 1);
  return Report(info, common, "logreg",
                absl::StrCat("logreg · ", name, " · ", common.method),
                std::move(config), outcomes, SecondsSince(start));
}

}  // namespace bnn::experiment
