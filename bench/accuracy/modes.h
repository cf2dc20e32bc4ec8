// The modes of bnn-experiment. Each mode lives in its own file and only
// declares its flags and runs its protocol on top of experiment.h; main.cc
// dispatches on the first argument. A new mode adds one entry to Modes().
#ifndef BNN_BENCH_ACCURACY_MODES_H_
#define BNN_BENCH_ACCURACY_MODES_H_

#include <vector>

#include "absl/status/status.h"

#include "bench/accuracy/experiment.h"
#include "bench/accuracy/flags.h"

namespace bnn::experiment {

struct Mode {
  const char* name;
  const char* summary;
  // Declares every flag the mode accepts (DeclareCommonFlags plus its own).
  void (*declare_flags)(FlagSet* flags);
  absl::Status (*run)(const FlagSet& flags, const RunInfo& info);
};

// UCI regression with the standard splits (SLANG §9.4, Table 2).
void DeclareUciFlags(FlagSet* flags);
absl::Status RunUci(const FlagSet& flags, const RunInfo& info);

// Bayesian logistic regression on a labelled CSV (SLANG §9.1, Table 1).
void DeclareLogregFlags(FlagSet* flags);
absl::Status RunLogreg(const FlagSet& flags, const RunInfo& info);

// One classifier on a given train/test pair (IDX or CSV): accuracy, NLL,
// ECE, Brier, reliability diagram, learning curve (BALI Table 2, Fig. 2).
void DeclareClassifyFlags(FlagSet* flags);
absl::Status RunClassify(const FlagSet& flags, const RunInfo& info);

// OOD detection by predictive entropy and mutual information: AUROC and
// ROC curves (BALI §5.5, Fig. 3).
void DeclareOodFlags(FlagSet* flags);
absl::Status RunOod(const FlagSet& flags, const RunInfo& info);

// Active learning on a UCI set: max-variance vs random acquisition with
// retraining from scratch, optionally Pearson correlation of predictive
// variances with HMC (NNG §5.3, Tables 3 and 4).
void DeclareActiveLearningFlags(FlagSet* flags);
absl::Status RunActiveLearning(const FlagSet& flags, const RunInfo& info);

const std::vector<Mode>& Modes();

}  // namespace bnn::experiment

#endif  // BNN_BENCH_ACCURACY_MODES_H_
