// A job's loss curve, kept in its record at bounded size: the loss after
// every k-th step, k doubling (and every other point dropped) whenever the
// curve is full, so a run of any length keeps between kMaxLossPoints / 2 and
// kMaxLossPoints evenly spaced points.
#ifndef BNN_SERVER_JOBS_LOSS_CURVE_H_
#define BNN_SERVER_JOBS_LOSS_CURVE_H_

#include <cstdint>

#include "store/store.pb.h"

namespace bnn::server {

inline constexpr int kMaxLossPoints = 1000;

// The loss after `step` (steps count from 1): kept if `step` is a multiple
// of job->loss_curve_stride() (1 when unset); a second report of the last
// kept step replaces its loss. A full curve first keeps only the points at
// multiples of twice the stride, and the stride doubles.
void AddLossPoint(int64_t step, double loss, store::JobRecord* job);

// Drops the points after `step`: a job resumed from a checkpoint taken
// after `step` steps reports the later steps again.
void TruncateLossCurve(int64_t step, store::JobRecord* job);

}  // namespace bnn::server

#endif  // BNN_SERVER_JOBS_LOSS_CURVE_H_
