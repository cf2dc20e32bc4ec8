#include "server/jobs/loss_curve.h"

#include <algorithm>

namespace bnn::server {

void AddLossPoint(int64_t step, double loss, store::JobRecord* job) {
  auto* steps = job->mutable_loss_curve_steps();
  auto* losses = job->mutable_loss_curve_losses();
  if (!steps->empty() && *steps->rbegin() == step) {
    *losses->rbegin() = loss;
    return;
  }
  int64_t stride = std::max<int64_t>(job->loss_curve_stride(), 1);
  if (step <= 0 || step % stride != 0) return;
  if (steps->size() >= kMaxLossPoints) {
    stride *= 2;
    int kept = 0;
    for (int i = 0; i < steps->size(); ++i) {
      if (steps->Get(i) % stride != 0) continue;
      steps->Set(kept, steps->Get(i));
      losses->Set(kept, losses->Get(i));
      ++kept;
    }
    steps->Truncate(kept);
    losses->Truncate(kept);
    job->set_loss_curve_stride(stride);
    if (step % stride != 0) return;
  }
  job->set_loss_curve_stride(stride);
  steps->Add(step);
  losses->Add(loss);
}

void TruncateLossCurve(int64_t step, store::JobRecord* job) {
  int kept = job->loss_curve_steps_size();
  while (kept > 0 && job->loss_curve_steps(kept - 1) > step) --kept;
  job->mutable_loss_curve_steps()->Truncate(kept);
  job->mutable_loss_curve_losses()->Truncate(
      std::min(kept, job->loss_curve_losses_size()));
}

}  // namespace bnn::server
