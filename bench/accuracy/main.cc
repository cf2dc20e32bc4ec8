// bnn-experiment: paper reproductions on top of the core library. Usage:
//   bnn-experiment MODE --flag value ...
// Run without arguments for the list of modes, or with a mode and --help
// for its flags. Modes are listed in Modes() (modes.h).
#include <iostream>
#include <string>
#include <vector>

#include "bench/accuracy/experiment.h"
#include "bench/accuracy/flags.h"
#include "bench/accuracy/modes.h"

namespace bnn::experiment {

const std::vector<Mode>& Modes() {
  static const auto* modes = new std::vector<Mode>{
      {"uci",
       "UCI regression with the standard splits: RMSE and test "
       "log-likelihood, hyperparameters tuned by K-fold CV (SLANG Table 2)",
       DeclareUciFlags, RunUci},
      {"logreg",
       "Bayesian logistic regression on a CSV: -ELBO/N, log-loss, symmetric "
       "KL to Full-Gaussian Exact (SLANG Table 1)",
       DeclareLogregFlags, RunLogreg},
      {"classify",
       "one classifier on a train/test pair (IDX or CSV): accuracy, NLL, "
       "ECE (15 bins), Brier, reliability diagram, learning curve (BALI "
       "Table 2)",
       DeclareClassifyFlags, RunClassify},
      {"ood",
       "OOD detection: AUROC and ROC curves of predictive entropy and "
       "mutual information, in-distribution vs OOD set (BALI §5.5)",
       DeclareOodFlags, RunOod},
      {"active-learning",
       "active learning on a UCI set: test RMSE after max-variance or random "
       "acquisitions, retraining from scratch; Pearson correlation of "
       "predictive variances with HMC (NNG Tables 3 and 4)",
       DeclareActiveLearningFlags, RunActiveLearning},
  };
  return *modes;
}

namespace {

void PrintModes() {
  std::cerr << "usage: bnn-experiment MODE [--flag value ...]\nmodes:\n";
  for (const Mode& mode : Modes()) {
    std::cerr << "  " << mode.name << "\t" << mode.summary << "\n";
  }
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    PrintModes();
    return 2;
  }
  const std::string name = argv[1];
  for (const Mode& mode : Modes()) {
    if (name != mode.name) continue;
    FlagSet flags;
    mode.declare_flags(&flags);
    const std::vector<std::string> args(argv + 2, argv + argc);
    if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
      std::cout << "bnn-experiment " << mode.name << ": " << mode.summary
                << "\n"
                << flags.Usage();
      return 0;
    }
    if (absl::Status parsed = flags.Parse(args); !parsed.ok()) {
      std::cerr << parsed.message() << "\nflags of '" << mode.name << "':\n"
                << flags.Usage();
      return 2;
    }
    const absl::Status status = mode.run(flags, CollectRunInfo(argc, argv));
    if (!status.ok()) {
      std::cerr << "bnn-experiment " << mode.name << ": " << status << "\n";
      return 1;
    }
    return 0;
  }
  std::cerr << "unknown mode '" << name << "'\n";
  PrintModes();
  return 2;
}

}  // namespace
}  // namespace bnn::experiment

int main(int argc, char** argv) { return bnn::experiment::Main(argc, argv); }
