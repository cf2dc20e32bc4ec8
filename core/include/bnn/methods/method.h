// The interface every inference method implements. A method owns its
// posterior and optimiser state; the Trainer owns the loop around it.
#ifndef BNN_METHODS_METHOD_H_
#define BNN_METHODS_METHOD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "bnn/data/dataset.h"
#include "bnn/memory.h"
#include "bnn/methods/options.h"
#include "bnn/model/model_spec.h"
#include "bnn/random.h"

namespace bnn {

class Posterior;  // bnn/posterior/posterior.h (Eigen-heavy)
namespace checkpoint {
class MethodState;  // bnn/core/checkpoint.pb.h
}  // namespace checkpoint

// Wall-clock seconds of a step's phases, for methods that report them (the
// benchmarks of BALI and noisy K-FAC); zero otherwise.
struct PhaseSeconds {
  double forward_backward = 0.0;  // passes through the network
  double statistics = 0.0;        // EMA / curvature statistics
  double factorization = 0.0;     // inverses, Cholesky / eigendecompositions
  double sampling = 0.0;          // drawing the next weights
};

struct StepStats {
  // Mean negative log-likelihood per example of the minibatch, averaged over
  // the method's MC samples (standardised units).
  double loss = 0.0;
  PhaseSeconds phases;
};

// Not thread-safe: one training job drives one method from one thread.
class VariationalMethod {
 public:
  virtual ~VariationalMethod() = default;

  virtual absl::string_view name() const = 0;

  // Prepares state for `spec` and the (standardised) training set `train`,
  // which must outlive every later Step(). `rng` seeds the initial mean.
  virtual absl::Status Initialize(const ModelSpec& spec, const Dataset& train,
                                  Rng& rng) = 0;

  // Continual learning, after Initialize(): start from `posterior` (same
  // parameter layout) instead of the default initialisation and, when
  // `as_prior`, use it as the prior in place of the method's own (the online
  // Bayesian update). Unimplemented for methods that cannot; InvalidArgument
  // for a posterior family the method cannot start from.
  virtual absl::Status WarmStart(const Posterior& posterior, bool as_prior);

  // Called by the trainer after Initialize()/WarmStart(), before the first
  // Step(): the run's length, for schedules that depend on it (e.g. NNG's
  // step-size drop in the second half of training). Default: ignored.
  virtual void SetSchedule(int64_t steps_per_epoch, int64_t total_steps) {}

  // Rows of `train` per step (the trainer draws minibatches of this size).
  virtual int batch_size() const = 0;

  // Weight samples per step: a step's network passes run over batch_size()
  // x samples_per_step() rows (S of SLANG, NNG, BBB and VOGN; HMC's
  // chains). Sizes a step's GEMMs for the thread policy
  // (bnn/compute_threads.h).
  virtual int samples_per_step() const { return 1; }

  // One update on the rows `batch` of the training set.
  virtual absl::StatusOr<StepStats> Step(const std::vector<int64_t>& batch,
                                         Rng& rng) = 0;

  // The current posterior (a copy; training may continue).
  virtual std::unique_ptr<Posterior> ExportPosterior() const = 0;

  // Frees the per-step workspaces (buffers every Step() refills), keeping
  // the state: a later Step() allocates them again and gives the same bits.
  // The trainer calls it before the final ExportPosterior(), so that the
  // exported copy does not coexist with them at the run's memory peak
  // (issue 15: SLANG's U update, eigenvectors and eigensolver block are
  // 3 x D x L). Default: nothing to free.
  virtual void ReleaseWorkspaces() {}

  // tau of the Gaussian likelihood the predictive should use.
  virtual double noise_precision() const = 0;

  // The method's options in canonical string form (for snapshots).
  virtual ParamMap Params() const = 0;

  // Checkpoints (bnn/train/checkpoint.h). SaveState writes, between two
  // steps, everything later steps depend on: the posterior, optimiser
  // statistics (momenta, Adam moments, Fisher / Kronecker / BALI EMAs and
  // their factorisations where they are refreshed on a schedule), step
  // counters and schedule positions, samples collected so far, and a
  // warm start's prior. ResourceExhausted if the state cannot be
  // serialised (2 GiB or more).
  virtual absl::Status SaveState(checkpoint::MethodState* state) const = 0;
  // Continues from `state`, called after Initialize(), WarmStart() (for a
  // warm-started plan) and SetSchedule() as for the run that saved it, with
  // the same options, model and training set: later steps then give the
  // same bits as the saved method's would (with the same random streams and
  // compute threads). InvalidArgument if `state` is of another method or
  // its arrays do not fit the model; FailedPrecondition if its layout
  // version is newer than this build reads. On error the method must not
  // be stepped.
  virtual absl::Status LoadState(const checkpoint::MethodState& state) = 0;

  // Peak heap bytes of training with this method's options on `num_rows`
  // rows of a model `spec` for `total_steps` steps, estimated before
  // Initialize() so that a job that cannot fit is refused before it
  // allocates: the posterior family's state and optimiser state, the
  // per-step workspaces (the minibatch's forward and backward passes over
  // S x M rows, weight samples, factorisations) and the posterior
  // ExportPosterior() returns (its bytes also in `kept_bytes`), and a
  // checkpoint of the state (SaveState and its encoding) taken between two
  // steps. The training data is the trainer's (EstimateTrainingMemory).
  virtual MemoryEstimate EstimateMemory(const ModelSpec& spec, int64_t num_rows,
                                        int64_t total_steps) const = 0;
};

}  // namespace bnn

#endif  // BNN_METHODS_METHOD_H_
