// Serving replicas sharing one PostgreSQL and one blob directory (issue 14's
// scale benchmark, docs/results/scale.md). Starts a real PostgreSQL (the
// tests' PostgresServer) and up to --replicas real bnn-server processes on
// loopback, trains a 13-50-1 SLANG model on replica A and publishes it, then:
//  1. for n = 1 .. --replicas, --clients closed-loop clients (client i on
//     replica i mod n) send --rows-row Predicts of "m@stable" (an alias,
//     resolved in the store on every request) for --seconds: calls/s,
//     p50/p99, and each replica's RSS;
//  2. the cold model load: a replica started with --preload-models=false
//     answers its first Predict of the model (metadata from PostgreSQL, the
//     snapshot from the shared blob directory), against the same on a
//     single-node server with SQLite and its own data directory;
//  3. the per-request cost of the shared store: warm Predicts by alias and
//     by snapshot id, on a PostgreSQL replica and on the SQLite server.
//
//   build/bench/scale/bnn_replicas_bench --server build/server/bnn-server
//       [--replicas 3 --clients 6 --seconds 10 --json_out FILE]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <nlohmann/json.hpp>

#include "bnn/check.h"
#include "bnn/random.h"

#include "bench/common/provenance.h"
#include "client/bnn_client.h"
#include "tests/test_util/postgres_server.h"
#include "tests/test_util/subprocess.h"

ABSL_FLAG(std::string, server, "", "Path of bnn-server (required).");
ABSL_FLAG(int, replicas, 3, "Most serving replicas.");
ABSL_FLAG(int, clients, 6, "Closed-loop Predict clients.");
ABSL_FLAG(double, seconds, 10, "Length of each throughput phase.");
ABSL_FLAG(int, rows, 10, "Rows per Predict.");
ABSL_FLAG(int, samples, 16, "Samples per Predict.");
ABSL_FLAG(int, repeats, 20, "Warm single-call latencies measured per case.");
ABSL_FLAG(std::string, work_dir, "/tmp/bnn_replicas_bench", "Scratch folder.");
ABSL_FLAG(std::string, json_out, "", "Write the results as JSON here.");

namespace bnn::bench {
namespace {

using client::BnnClient;
using testing::PostgresServer;
using testing::ServerProcess;

std::unique_ptr<BnnClient> Connect(const std::string& address) {
  BnnClient::Options options;
  options.target = address;
  absl::StatusOr<std::unique_ptr<BnnClient>> c = BnnClient::Create(options);
  BNN_CHECK_OK(c.status());
  return *std::move(c);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

std::vector<double> Rows(int rows, uint64_t seed) {
  std::vector<double> x(static_cast<size_t>(rows) * 13);
  CounterRng(seed).FillNormal(0, 0, x.data(), x.size());
  return x;
}

// Milliseconds of one Predict of `target` (a model reference or snapshot).
double TimedPredict(BnnClient& c, const std::string& target, bool model,
                    const std::vector<double>& x) {
  v1::PredictRequest request;
  if (model) {
    request.set_model(target);
  } else {
    request.set_snapshot_id(target);
  }
  request.set_num_samples(absl::GetFlag(FLAGS_samples));
  request.set_seed(1);
  request.mutable_features()->add_shape(static_cast<int64_t>(x.size() / 13));
  request.mutable_features()->add_shape(13);
  request.mutable_features()->mutable_f64()->Add(x.begin(), x.end());
  const absl::Time t = absl::Now();
  BNN_CHECK_OK(c.Predict(request).status());
  return absl::ToDoubleMilliseconds(absl::Now() - t);
}

int64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  int64_t kib = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kib;
      return kib * 1024;
    }
  }
  return -1;
}

nlohmann::json WarmLatencies(BnnClient& c, const std::string& model,
                             const std::string& snapshot) {
  const std::vector<double> x = Rows(absl::GetFlag(FLAGS_rows), 3);
  std::vector<double> by_alias, by_id;
  TimedPredict(c, model, true, x);
  for (int i = 0; i < absl::GetFlag(FLAGS_repeats); ++i) {
    by_alias.push_back(TimedPredict(c, model, true, x));
    by_id.push_back(TimedPredict(c, snapshot, false, x));
  }
  return {{"by_alias_p50_ms", Percentile(by_alias, 0.5)},
          {"by_snapshot_id_p50_ms", Percentile(by_id, 0.5)}};
}

int Main() {
  const std::string server = absl::GetFlag(FLAGS_server);
  BNN_CHECK(!server.empty());  // --server is required
  const std::string work = absl::GetFlag(FLAGS_work_dir);
  std::filesystem::remove_all(work);
  std::filesystem::create_directories(work);
  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Start();
  BNN_CHECK_OK(pg.status());
  BNN_CHECK_OK((*pg)->CreateDatabase("bnn"));
  const std::vector<std::string> shared = {
      "--threads=1", absl::StrCat("--metadata=", (*pg)->Uri("bnn")),
      absl::StrCat("--blob-dir=", work, "/blobs")};
  std::vector<std::unique_ptr<ServerProcess>> replicas;
  auto start_replica = [&](std::vector<std::string> extra) {
    const std::string name = absl::StrCat("r", replicas.size());
    extra.insert(extra.begin(), shared.begin(), shared.end());
    absl::StatusOr<std::unique_ptr<ServerProcess>> p =
        ServerProcess::Start(server, absl::StrCat(work, "/", name),
                             absl::StrCat(work, "/", name, ".log"), extra);
    BNN_CHECK_OK(p.status());
    replicas.push_back(*std::move(p));
    return replicas.back().get();
  };

  // The model, trained and published on replica A.
  ServerProcess* a = start_replica({});
  std::unique_ptr<BnnClient> ca = Connect(a->address());
  std::vector<double> x = Rows(500, 7), y(500);
  for (int i = 0; i < 500; ++i) y[i] = x[i * 13] - 0.5 * x[i * 13 + 1];
  v1::DatasetHeader header;
  header.set_name("uci-like");
  header.set_task(v1::TASK_REGRESSION);
  header.set_num_features(13);
  absl::StatusOr<v1::DatasetInfo> ds = ca->UploadDataset(header, x, y);
  BNN_CHECK_OK(ds.status());
  v1::StartTrainingRequest train;
  train.set_dataset_id(ds->dataset_id());
  train.set_method("slang");
  train.set_epochs(20);
  train.mutable_model()->add_hidden_sizes(50);
  absl::StatusOr<std::string> job = ca->StartTraining(train);
  BNN_CHECK_OK(job.status());
  absl::StatusOr<v1::Job> done = ca->WaitForJob(*job, absl::Seconds(300));
  BNN_CHECK_OK(done.status());
  const std::string snapshot = done->snapshot_id();
  BNN_CHECK_OK(ca->PublishModel("m", snapshot, {"stable"}).status());

  nlohmann::json out;
  out["build"] = ProvenanceJson(server);
  out["clients"] = absl::GetFlag(FLAGS_clients);
  out["rows"] = absl::GetFlag(FLAGS_rows);
  out["samples"] = absl::GetFlag(FLAGS_samples);
  out["seconds"] = absl::GetFlag(FLAGS_seconds);
  out["throughput"] = nlohmann::json::array();
  const int clients = absl::GetFlag(FLAGS_clients);
  for (int n = 1; n <= absl::GetFlag(FLAGS_replicas); ++n) {
    while (static_cast<int>(replicas.size()) < n) start_replica({});
    std::vector<std::vector<double>> ms(clients);
    const absl::Time end =
        absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
    std::vector<std::thread> threads;
    for (int k = 0; k < clients; ++k) {
      threads.emplace_back([&, k] {
        std::unique_ptr<BnnClient> c = Connect(replicas[k % n]->address());
        const std::vector<double> rows = Rows(absl::GetFlag(FLAGS_rows), k);
        TimedPredict(*c, "m@stable", true, rows);  // warm-up
        while (absl::Now() < end) {
          ms[k].push_back(TimedPredict(*c, "m@stable", true, rows));
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::vector<double> all;
    for (const auto& v : ms) all.insert(all.end(), v.begin(), v.end());
    nlohmann::json rss = nlohmann::json::array();
    for (int r = 0; r < n; ++r) rss.push_back(RssBytes(replicas[r]->pid()));
    const double rate = all.size() / absl::GetFlag(FLAGS_seconds);
    out["throughput"].push_back({{"replicas", n},
                                 {"calls_per_second", rate},
                                 {"p50_ms", Percentile(all, 0.5)},
                                 {"p99_ms", Percentile(all, 0.99)},
                                 {"replica_rss_bytes", rss}});
    std::printf("%d replica(s): %.0f calls/s, p50 %.2f ms, p99 %.2f ms\n", n,
                rate, Percentile(all, 0.5), Percentile(all, 0.99));
  }

  // Cold loads and warm per-request costs: PostgreSQL replica vs SQLite.
  const std::vector<double> one = Rows(absl::GetFlag(FLAGS_rows), 3);
  ServerProcess* cold = start_replica({"--preload-models=false"});
  std::unique_ptr<BnnClient> cc = Connect(cold->address());
  const double pg_cold = TimedPredict(*cc, "m@stable", true, one);
  out["postgres"] = WarmLatencies(*cc, "m@stable", snapshot);
  out["postgres"]["cold_first_predict_ms"] = pg_cold;

  absl::StatusOr<std::string> bytes = ca->ExportSnapshotToString(snapshot);
  BNN_CHECK_OK(bytes.status());
  absl::StatusOr<std::unique_ptr<ServerProcess>> single =
      ServerProcess::Start(server, work + "/single", work + "/single.log",
                           {"--threads=1", "--preload-models=false"});
  BNN_CHECK_OK(single.status());
  std::string single_snapshot;
  {
    std::unique_ptr<BnnClient> cs = Connect((*single)->address());
    absl::StatusOr<v1::SnapshotInfo> imported = cs->ImportSnapshot(*bytes);
    BNN_CHECK_OK(imported.status());
    single_snapshot = imported->snapshot_id();
    BNN_CHECK_OK(cs->PublishModel("m", single_snapshot, {"stable"}).status());
  }
  // A restart, so that the first Predict loads the snapshot.
  BNN_CHECK_OK((*single)->Stop(SIGTERM).status());
  single = ServerProcess::Start(server, work + "/single", work + "/single.log",
                                {"--threads=1", "--preload-models=false"});
  BNN_CHECK_OK(single.status());
  std::unique_ptr<BnnClient> cs = Connect((*single)->address());
  const double sqlite_cold = TimedPredict(*cs, "m@stable", true, one);
  out["sqlite"] = WarmLatencies(*cs, "m@stable", single_snapshot);
  out["sqlite"]["cold_first_predict_ms"] = sqlite_cold;
  std::printf(
      "cold first Predict: PostgreSQL replica %.2f ms, SQLite %.2f ms\n",
      pg_cold, sqlite_cold);
  std::printf(
      "warm p50 by alias / by id: PostgreSQL %.3f / %.3f ms, "
      "SQLite %.3f / %.3f ms\n",
      out["postgres"]["by_alias_p50_ms"].get<double>(),
      out["postgres"]["by_snapshot_id_p50_ms"].get<double>(),
      out["sqlite"]["by_alias_p50_ms"].get<double>(),
      out["sqlite"]["by_snapshot_id_p50_ms"].get<double>());
  if (!absl::GetFlag(FLAGS_json_out).empty()) {
    std::ofstream(absl::GetFlag(FLAGS_json_out)) << out.dump(2) << "\n";
  }
  for (auto& r : replicas) BNN_CHECK_OK(r->Stop(SIGTERM).status());
  BNN_CHECK_OK((*single)->Stop(SIGTERM).status());
  return 0;
}

}  // namespace
}  // namespace bnn::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return bnn::bench::Main();
}
