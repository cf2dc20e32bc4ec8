// The parallel loop behind Posterior::Sample: fixed tiles of work, spread
// over the calling thread's OpenMP threads, with interrupt checks between
// groups of tiles. Internal to the posterior families.
#ifndef BNN_POSTERIOR_SAMPLE_TILES_H_
#define BNN_POSTERIOR_SAMPLE_TILES_H_

#include <algorithm>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include <Eigen/Core>

#include "bnn/interrupt.h"
#include "bnn/random.h"

namespace bnn {
namespace internal {

// Rows per tile of the families that tile over rows: 1024 rows of 64
// samples are 512 KiB of doubles, within one core's L2 cache.
inline constexpr int64_t kSampleTileRows = 1024;

// Samples per tile of the families that draw whole columns (full,
// Kronecker, Kronecker chain): the solves and products of a tile are
// independent of the others.
inline constexpr int64_t kColumnsPerTile = 4;

// Runs tile(t) for every t in [0, num_tiles), each tile covering about
// `values_per_tile` weight values, in groups of at most
// Posterior::kSampleGroupValues values. `interrupt` is checked before each
// group after the first; then after_group(begin, end) (if set) runs on the
// calling thread once tiles [begin, end) are done. The tiles of a group run
// in parallel on up to the calling thread's OpenMP limit of threads, each
// with Eigen on one thread, so a tile's arithmetic is the same whatever the
// thread count; small groups run on the calling thread alone. Returns the
// interrupt's status, or OK. `tiles_per_group`, if not null, receives the
// group size (the same for every thread count).
absl::Status ForEachSampleTile(
    int64_t num_tiles, int64_t values_per_tile, const Interrupt& interrupt,
    const std::function<void(int64_t)>& tile,
    const std::function<void(int64_t, int64_t)>& after_group = nullptr);

// ForEachSampleTile over tiles of `columns_per_tile` whole sample columns
// of a `dim` x `num_samples` draw: column_tile(c0, n) draws columns
// [c0, c0 + n) (n < columns_per_tile only for the last tile).
inline absl::Status ForEachColumnTile(
    int num_samples, int64_t dim, int64_t columns_per_tile,
    const Interrupt& interrupt,
    const std::function<void(int64_t, int64_t)>& column_tile) {
  return ForEachSampleTile(
      (num_samples + columns_per_tile - 1) / columns_per_tile,
      columns_per_tile * dim, interrupt, [&](int64_t t) {
        const int64_t c0 = t * columns_per_tile;
        column_tile(c0, std::min<int64_t>(columns_per_tile, num_samples - c0));
      });
}

// Tiles per group of ForEachSampleTile for tiles of `values_per_tile`.
int64_t SampleTilesPerGroup(int64_t values_per_tile);

// Rows [row0, row0 + block.rows()) of every column s of a D x S draw:
// standard normals number row0 .. of stream s.
void FillNormalRows(const CounterRng& rng, int64_t row0,
                    Eigen::Ref<Eigen::MatrixXd> block);

}  // namespace internal
}  // namespace bnn

#endif  // BNN_POSTERIOR_SAMPLE_TILES_H_
