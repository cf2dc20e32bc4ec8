// The store's lookups on the hot paths, on a data directory in /tmp (the
// metadata store in SQLite, WAL, a page cache that holds it):
//   - Predict by snapshot id: PredictorCache::Get of a cached predictor (the
//     snapshot's record is looked up to see that it still exists);
//   - Predict by model reference: ModelStore::Resolve of "m@stable", then
//     the same;
//   - GetJob, and ListJobs' first page of 100 among 1000 jobs, newest first.
//
//   build/bench/perf/bnn_store_bench
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <absl/strings/str_cat.h>
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>

#include "bnn/check.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/random.h"

#include "server/store/job_store.h"
#include "server/store/metadata_dir.h"
#include "server/store/model_store.h"
#include "server/store/predictor_cache.h"
#include "server/store/snapshot_store.h"

namespace bnn::server {
namespace {

// A small regression snapshot (1 input, 16 hidden units, rank 2).
Snapshot SmallSnapshot() {
  Snapshot s;
  s.task = Task::kRegression;
  s.model = ModelSpec::ForTask(s.task, 1, 1, {16}, Activation::kRelu);
  const int64_t dim = s.model.NumParameters();
  Rng rng(3);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, 2);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = 0.05 * rng.Normal();
    d[j] = 100 + rng.Uniform();
    for (int l = 0; l < 2; ++l) u(j, l) = rng.Normal();
  }
  auto posterior = LowRankGaussianPosterior::Create(mean, u, d);
  BNN_CHECK_OK(posterior.status());
  s.posterior = std::move(posterior).value();
  s.standardization.feature_mean.assign(1, 0.0);
  s.standardization.feature_std.assign(1, 1.0);
  s.method = "slang";
  return s;
}

// One data directory with one snapshot published as m (alias stable), a
// cached predictor of it, and 1000 jobs; removed at exit.
struct Store {
  Store() {
    spdlog::set_level(spdlog::level::warn);
    std::string pattern =
        (std::filesystem::temp_directory_path() / "bnn-store-bench-XXXXXX")
            .string();
    BNN_CHECK(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
    absl::StatusOr<MetadataDir> opened =
        MetadataDir::Open(path, MetadataDir::Options());
    BNN_CHECK_OK(opened.status());
    dir = *std::move(opened);
    snapshots =
        std::make_unique<SnapshotStore>(dir.metadata.get(), dir.blobs.get());
    models = *ModelStore::Open({}, snapshots.get());
    predictors = *PredictorCache::Create({}, snapshots.get());
    jobs = *JobStore::Open(dir.metadata.get(), path + "/checkpoints");
    snapshot_id = snapshots->Create(SmallSnapshot())->snapshot_id();
    BNN_CHECK_OK(models->Publish("m", snapshot_id, {"stable"}).status());
    BNN_CHECK_OK(predictors->Get(snapshot_id).status());
    store::JobRecord job;
    job.set_dataset_id("ds-00000000000000aa");
    job.set_method("slang");
    for (int i = 0; i < 1000; ++i) {
      job_id = jobs->Create(job)->job_id();
    }
  }
  ~Store() {
    jobs.reset();
    predictors.reset();
    models.reset();
    snapshots.reset();
    dir = MetadataDir();
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }

  std::string path;
  MetadataDir dir;
  std::unique_ptr<SnapshotStore> snapshots;
  std::unique_ptr<ModelStore> models;
  std::unique_ptr<PredictorCache> predictors;
  std::unique_ptr<JobStore> jobs;
  std::string snapshot_id;
  std::string job_id;
};

Store& TheStore() {
  static Store* store = new Store();
  return *store;
}

void BM_PredictorBySnapshotId(benchmark::State& state) {
  Store& store = TheStore();
  for (auto _ : state) {
    benchmark::DoNotOptimize(store.predictors->Get(store.snapshot_id));
  }
}
BENCHMARK(BM_PredictorBySnapshotId);

void BM_PredictorByModelRef(benchmark::State& state) {
  Store& store = TheStore();
  const ModelRef ref = *ParseModelRef("model", "m@stable");
  for (auto _ : state) {
    const absl::StatusOr<ResolvedModel> resolved = store.models->Resolve(ref);
    benchmark::DoNotOptimize(store.predictors->Get(resolved->snapshot_id));
  }
}
BENCHMARK(BM_PredictorByModelRef);

void BM_GetJob(benchmark::State& state) {
  Store& store = TheStore();
  for (auto _ : state) {
    benchmark::DoNotOptimize(store.jobs->Get(store.job_id));
  }
}
BENCHMARK(BM_GetJob);

void BM_ListJobsFirstPage(benchmark::State& state) {
  Store& store = TheStore();
  for (auto _ : state) {
    bool more = false;
    benchmark::DoNotOptimize(
        store.jobs->ListNewestFirst({}, std::nullopt, 100, &more));
  }
}
BENCHMARK(BM_ListJobsFirstPage);

}  // namespace
}  // namespace bnn::server
