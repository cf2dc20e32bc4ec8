#include "server/jobs/loss_curve.h"

#include <algorithm>

namespace bnn::server {

void AddLossPoint(int64_t step, double loss, store::JobRecord* job) {
  auto* curve = job->mutable_loss_curve();
  if (!curve->empty() && curve->rbegin()->step() == step) {
    curve->rbegin()->set_loss(loss);
    return;
  }
  int64_t stride = std::max<int64_t>(job->loss_curve_stride(), 1);
  if (step <= 0 || step % stride != 0) return;
  if (curve->size() >= kMaxLossPoints) {
    stride *= 2;
    int kept = 0;
    for (int i = 0; i < curve->size(); ++i) {
      if (curve->Get(i).step() % stride == 0) {
        curve->SwapElements(i, kept++);
      }
    }
    curve->DeleteSubrange(kept, curve->size() - kept);
    job->set_loss_curve_stride(stride);
    if (step % stride != 0) return;
  }
  job->set_loss_curve_stride(stride);
  store::LossPoint* point = curve->Add();
  point->set_step(step);
  point->set_loss(loss);
}

void TruncateLossCurve(int64_t step, store::JobRecord* job) {
  auto* curve = job->mutable_loss_curve();
  int kept = curve->size();
  while (kept > 0 && curve->Get(kept - 1).step() > step) --kept;
  curve->DeleteSubrange(kept, curve->size() - kept);
}

}  // namespace bnn::server
