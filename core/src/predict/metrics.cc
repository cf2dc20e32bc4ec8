#include "bnn/predict/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "bnn/check.h"
#include "bnn/model/likelihood.h"

namespace bnn {
namespace {

int Label(double y) { return static_cast<int>(y); }

}  // namespace

double Rmse(absl::Span<const double> mean, absl::Span<const double> y) {
  BNN_CHECK_EQ(mean.size(), y.size());
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i)
    sum += (mean[i] - y[i]) * (mean[i] - y[i]);
  return std::sqrt(sum / y.size());
}

double GaussianMixtureLogLikelihood(absl::Span<const double> samples,
                                    int num_samples, absl::Span<const double> y,
                                    double tau) {
  const size_t n = y.size();
  BNN_CHECK_EQ(samples.size(), n * num_samples);
  const double log_norm = 0.5 * (std::log(tau) - kLog2Pi);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int s = 0; s < num_samples; ++s) {
      const double r = y[i] - samples[s * n + i];
      mx = std::max(mx, -0.5 * tau * r * r);
    }
    double acc = 0;
    for (int s = 0; s < num_samples; ++s) {
      const double r = y[i] - samples[s * n + i];
      acc += std::exp(-0.5 * tau * r * r - mx);
    }
    // Every sample infinitely far away: the likelihood is 0 (log = -inf).
    if (mx == -std::numeric_limits<double>::infinity()) return mx;
    total += mx + std::log(acc / num_samples) + log_norm;
  }
  return total / n;
}

double LogLoss(absl::Span<const double> probs, int num_classes,
               absl::Span<const double> labels) {
  BNN_CHECK_EQ(probs.size(), labels.size() * num_classes);
  // Clamp so that a confidently wrong prediction is large but finite.
  constexpr double kFloor = 1e-300;
  double total = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    total -=
        std::log(std::max(kFloor, probs[i * num_classes + Label(labels[i])]));
  }
  return total / labels.size();
}

double Accuracy(absl::Span<const double> probs, int num_classes,
                absl::Span<const double> labels) {
  BNN_CHECK_EQ(probs.size(), labels.size() * num_classes);
  int64_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double* p = probs.data() + i * num_classes;
    const int best = static_cast<int>(std::max_element(p, p + num_classes) - p);
    correct += best == Label(labels[i]);
  }
  return static_cast<double>(correct) / labels.size();
}

double Brier(absl::Span<const double> probs, int num_classes,
             absl::Span<const double> labels) {
  BNN_CHECK_EQ(probs.size(), labels.size() * num_classes);
  double total = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    for (int c = 0; c < num_classes; ++c) {
      const double target = c == Label(labels[i]) ? 1.0 : 0.0;
      const double r = probs[i * num_classes + c] - target;
      total += r * r;
    }
  }
  return total / labels.size();
}

std::vector<ReliabilityBin> ReliabilityDiagram(absl::Span<const double> probs,
                                               int num_classes,
                                               absl::Span<const double> labels,
                                               int bins) {
  BNN_CHECK_EQ(probs.size(), labels.size() * num_classes);
  BNN_CHECK(bins >= 1 && num_classes >= 1);
  std::vector<ReliabilityBin> out(bins);
  for (int b = 0; b < bins; ++b) {
    out[b].lower = static_cast<double>(b) / bins;
    out[b].upper = static_cast<double>(b + 1) / bins;
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    const double* p = probs.data() + i * num_classes;
    const int best = static_cast<int>(std::max_element(p, p + num_classes) - p);
    // Bin b covers (b/B, (b+1)/B]; confidence 0 goes to the first bin.
    int b = static_cast<int>(std::ceil(p[best] * bins)) - 1;
    b = std::clamp(b, 0, bins - 1);
    out[b].confidence += p[best];
    out[b].accuracy += best == Label(labels[i]);
    ++out[b].count;
  }
  for (ReliabilityBin& bin : out) {
    if (bin.count == 0) continue;
    bin.confidence /= static_cast<double>(bin.count);
    bin.accuracy /= static_cast<double>(bin.count);
  }
  return out;
}

double ExpectedCalibrationError(absl::Span<const ReliabilityBin> bins) {
  double weighted = 0;
  int64_t total = 0;
  for (const ReliabilityBin& bin : bins) {
    weighted += static_cast<double>(bin.count) *
                std::abs(bin.accuracy - bin.confidence);
    total += bin.count;
  }
  return total == 0 ? 0.0 : weighted / static_cast<double>(total);
}

double ExpectedCalibrationError(absl::Span<const double> probs, int num_classes,
                                absl::Span<const double> labels, int bins) {
  return ExpectedCalibrationError(
      ReliabilityDiagram(probs, num_classes, labels, bins));
}

double Auroc(absl::Span<const double> scores, absl::Span<const bool> positive) {
  BNN_CHECK_EQ(scores.size(), positive.size());
  const size_t n = scores.size();
  // NaN has no rank (and would break the sort's ordering).
  for (double s : scores) {
    if (std::isnan(s)) return std::numeric_limits<double>::quiet_NaN();
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney U with mid-ranks for ties.
  double rank_sum = 0;
  int64_t pos = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double mid_rank = 0.5 * (i + 1 + j);
    for (size_t k = i; k < j; ++k) {
      if (positive[order[k]]) {
        rank_sum += mid_rank;
        ++pos;
      }
    }
    i = j;
  }
  const int64_t neg = static_cast<int64_t>(n) - pos;
  if (pos == 0 || neg == 0) return std::numeric_limits<double>::quiet_NaN();
  return (rank_sum - 0.5 * pos * (pos + 1)) / (static_cast<double>(pos) * neg);
}

}  // namespace bnn
