// What the classify and ood modes share: labelled sets in IDX form
// (Fashion-MNIST, pixels / 255 in [0, 1]) or CSV form, their class
// alignment with a model, the flags that train a classifier (the BALI
// paper's 2 x 256 leaky-tanh net by default, a run length in iterations)
// and training it with an observer for learning curves.
#ifndef BNN_BENCH_ACCURACY_CLASSIFICATION_H_
#define BNN_BENCH_ACCURACY_CLASSIFICATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "bnn/data/dataset.h"
#include "bnn/io/snapshot.h"
#include "bnn/train/checkpoint.h"

#include "bench/accuracy/experiment.h"
#include "bench/accuracy/flags.h"

namespace bnn::experiment {

// The BALI paper's classification net (Kurle et al.,
// Sec. 5.3): 2 hidden
// layers of 256 units, leaky tanh f(x) = tanh(x) + 0.1 x.
inline constexpr int kDefaultClassifierWidth = 256;
inline constexpr int kDefaultClassifierDepth = 2;

// An IDX image file and, optionally, its label file: "IMAGES:LABELS" or
// "IMAGES".
struct IdxFiles {
  std::string images;
  std::string labels;  // empty: unlabelled
};
// Parses the value of --`flag`; errors name the flag.
absl::StatusOr<IdxFiles> ParseIdxFiles(const std::string& flag,
                                       const std::string& value,
                                       bool labels_required);

// The file name of a set's first file (the images of IMAGES:LABELS), for
// report titles.
std::string SetName(const std::string& source);

// Reads an IDX set with its bytes multiplied by `scale` (1/255: pixels in
// [0, 1]); labelled sets are classification data with class values 0..C-1.
absl::StatusOr<Dataset> ReadIdxSet(const IdxFiles& files,
                                   double scale = 1.0 / 255.0);

// --idx-scale: the factor applied to IDX bytes (default 1/255). A model
// must see the same scale in training, test and OOD sets.
absl::StatusOr<double> ParseIdxScale(const FlagSet& flags);

// Reads a CSV whose column `target` (name or 0-based index) holds class
// labels; the labels are kept raw (task kRegression) for MatchClasses.
// `target_optional`: a file without that column is read as features only
// (all targets 0, unlabelled), e.g. an OOD set.
struct CsvSet {
  Dataset data;
  bool labelled = false;
};
absl::StatusOr<CsvSet> ReadCsvSet(const std::string& path,
                                  const std::string& target,
                                  bool target_optional);

// Puts `data` in the label space of a model trained on `class_values`: every
// label (a class value of `data` when it is classification data, otherwise
// the raw target) becomes the index of the equal class value, and task,
// num_classes and class_values become the model's. InvalidArgument names
// the first row whose label is not a model class.
absl::Status MatchClasses(const std::vector<double>& class_values,
                          Dataset* data);

// The training flags both modes declare: --train-idx, --csv, --target,
// --idx-scale, --iterations, --save-snapshot.
void DeclareClassifierFlags(FlagSet* flags);

// What the training flags resolved to.
struct ClassifierSetup {
  CommonOptions common;  // hidden/activation defaulted; "steps" set
  Dataset train;
  std::string train_source;  // the --train-idx or --csv value
  bool from_idx = false;
  double idx_scale = 1.0 / 255.0;
  int64_t iterations = 0;  // 0: --param epochs decides
  std::string save_snapshot;
};
// Parses the common and training flags, applies the classifier defaults
// (hidden 256,256 and leaky_tanh unless given; raw pixels, i.e.
// standardize=false, for IDX; --iterations N as the trainer's steps=N) and
// reads the training set (exactly one of --train-idx, --csv).
absl::StatusOr<ClassifierSetup> ParseClassifierSetup(const FlagSet& flags);

// Records the resolved training settings in a mode's config.
void DescribeClassifierSetup(const ClassifierSetup& setup, Json* config);

// Checkpoints of a run longer than a session (--checkpoint): the core's
// training checkpoints (bnn/train/checkpoint.h), written to `path` every
// `interval` of training time, from which a rerun of the same command
// continues and finishes with the snapshot the uninterrupted run would have
// produced (same build and thread count).
struct ClassifierCheckpoints {
  std::string path;  // empty: no checkpoints
  absl::Duration interval = absl::Minutes(10);
  // Also (or, with interval zero, only) after every every_steps-th step.
  int64_t every_steps = 0;
  // After writing the first checkpoint at or beyond this step, training
  // stops with Aborted, as a preempted run would (for tests); 0: never.
  int64_t stop_at_step = 0;
  // Called with the step of each checkpoint before it is written (the
  // caller's own state, e.g. the learning curve so far, goes first: a crash
  // between the two leaves that state ahead of the checkpoint, never
  // behind it).
  std::function<absl::Status(int64_t step)> before_write;
  // The checkpoint to continue from; null: start from step 0.
  const Checkpoint* resume = nullptr;
};

// Trains setup.common.method once on setup.train with `seed`. With
// eval_every > 0, `observe` sees a snapshot of the current posterior after
// every eval_every-th step and after the last (bnn::TrainCallbacks).
absl::StatusOr<Snapshot> TrainClassifier(
    const ClassifierSetup& setup, uint64_t seed, int64_t eval_every = 0,
    std::function<absl::Status(const Snapshot&)> observe = nullptr,
    const ClassifierCheckpoints& checkpoints = {});

// Writes `snapshot` to `path` (if non-empty) for `ood --snapshot`.
absl::Status MaybeSaveSnapshot(const std::string& path,
                               const Snapshot& snapshot);

// Runs `fn` with `threads` OpenMP/Eigen threads: the modes that train one
// model put the cores into its linear algebra, not into splits.
absl::StatusOr<SplitOutcome> RunSingle(
    int threads, const std::function<absl::StatusOr<SplitOutcome>()>& fn);

}  // namespace bnn::experiment

#endif  // BNN_BENCH_ACCURACY_CLASSIFICATION_H_
