// bnn_stream_bench: times client streams against a running bnn-server.
//
//   upload: uploads --rows x --features random doubles (regression) in the
//           client library's chunks and prints the wall time and the bytes
//           sent; the caller reads the server's peak RSS (run.sh).
//   append: uploads --rows rows, then appends --append-rows rows
//           --repeats times and prints each append's wall time and the
//           median.
//
// bench/streams/run.sh drives it for docs/results/streams.md.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/str_cat.h>
#include <absl/time/clock.h>
#include <absl/time/time.h>

#include "client/bnn_client.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "bnn-server address");
ABSL_FLAG(std::string, mode, "upload", "upload or append");
ABSL_FLAG(int64_t, rows, 100000, "rows of the uploaded dataset");
ABSL_FLAG(int, features, 1, "features per row");
ABSL_FLAG(int64_t, append_rows, 1000, "rows per append (append mode)");
ABSL_FLAG(int, repeats, 5, "appends to time (append mode)");

namespace {

using ::bnn::client::BnnClient;

// `rows` x `features` uniform values and their targets.
void MakeRows(int64_t rows, int features, uint64_t seed, std::vector<double>* x,
              std::vector<double>* y) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  x->resize(rows * features);
  y->resize(rows);
  for (double& v : *x) v = uniform(rng);
  for (double& v : *y) v = uniform(rng);
}

int Run() {
  BnnClient::Options options;
  options.target = absl::GetFlag(FLAGS_server);
  options.rpc_timeout = absl::Minutes(30);
  absl::StatusOr<std::unique_ptr<BnnClient>> client =
      BnnClient::Create(options);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  const int features = absl::GetFlag(FLAGS_features);
  bnn::v1::DatasetHeader header;
  // Dataset names are unique on a server: one per run.
  header.set_name(absl::StrCat("bench-", absl::ToUnixNanos(absl::Now())));
  header.set_task(bnn::v1::TASK_REGRESSION);
  header.set_num_features(features);
  std::vector<double> x, y;
  MakeRows(absl::GetFlag(FLAGS_rows), features, 1, &x, &y);
  const absl::Time start = absl::Now();
  absl::StatusOr<bnn::v1::DatasetInfo> uploaded =
      (*client)->UploadDataset(header, x, y);
  const absl::Duration upload_time = absl::Now() - start;
  if (!uploaded.ok()) {
    std::cerr << "upload: " << uploaded.status() << "\n";
    return 1;
  }
  std::cout << "upload rows " << uploaded->num_rows() << " features "
            << features << " feature_bytes " << x.size() * 8 << " seconds "
            << absl::ToDoubleSeconds(upload_time) << "\n";
  if (absl::GetFlag(FLAGS_mode) != "append") return 0;

  std::vector<double> seconds;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    MakeRows(absl::GetFlag(FLAGS_append_rows), features, 2 + r, &x, &y);
    const absl::Time begin = absl::Now();
    absl::StatusOr<bnn::v1::DatasetInfo> appended =
        (*client)->AppendRows(uploaded->dataset_id(), x, features, y);
    const double took = absl::ToDoubleSeconds(absl::Now() - begin);
    if (!appended.ok()) {
      std::cerr << "append: " << appended.status() << "\n";
      return 1;
    }
    seconds.push_back(took);
    std::cout << "append " << r << " version " << appended->version()
              << " rows " << appended->num_rows() << " seconds " << took
              << "\n";
  }
  std::sort(seconds.begin(), seconds.end());
  std::cout << "append median seconds " << seconds[seconds.size() / 2] << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return Run();
}
