// Packed tensors against one message per row on the wire: a 100,000-row
// Predict of a UCI-size regression net (8 features, 50-50 hidden units)
// through a real bnn-server on gRPC loopback, per-row and packed (float64,
// float32), per-row and packed responses. For each form it times, median of
// --repeats calls:
//   encode: row-major doubles -> request message -> wire bytes (client);
//   call:   the whole RPC (client serialisation, loopback, the server's
//           parse, conversion, admission, prediction and response build,
//           the client's parse);
//   decode: response wire bytes -> message -> row-major mean and variance
//           arrays (client);
// and the request and response sizes. The prediction itself (same samples:
// a fixed seed, so the server's sample cache serves every call) is the
// same in every form; the differences are the wire's.
//
//   build/bench/perf/bnn_packed_wire_bench --server build/server/bnn-server
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include <Eigen/Core>
#include <grpcpp/grpcpp.h>

#include "bnn/check.h"
#include "bnn/posterior/low_rank_gaussian.h"
#include "bnn/random.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "bench/perf/latency_harness.h"

ABSL_FLAG(std::string, server, "", "Path of bnn-server (required).");
ABSL_FLAG(int, rows, 100000, "Rows per Predict.");
ABSL_FLAG(int, samples, 16, "Posterior samples per Predict.");
ABSL_FLAG(int, repeats, 7, "Timed calls per form (after one warm-up).");
ABSL_FLAG(std::vector<std::string>, server_args, {},
          "Extra bnn-server flags, comma-separated.");

namespace bnn::bench {
namespace {

constexpr int kFeatures = 8;

std::shared_ptr<Snapshot> UciSnapshot() {
  auto s = std::make_shared<Snapshot>();
  s->task = Task::kRegression;
  s->model =
      ModelSpec::ForTask(s->task, kFeatures, 0, {50, 50}, Activation::kRelu);
  s->method = "slang";
  s->library_version = "0.1.0";
  const int64_t dim = s->model.NumParameters();
  Rng rng(3);
  Eigen::VectorXd mean(dim), d(dim);
  Eigen::MatrixXd u(dim, 1);
  for (int64_t j = 0; j < dim; ++j) {
    mean[j] = 0.05 * rng.Normal();
    d[j] = 100 + rng.Uniform();
    u(j, 0) = rng.Normal();
  }
  s->posterior = *LowRankGaussianPosterior::Create(mean, u, d);
  s->standardization.feature_mean.assign(kFeatures, 0.0);
  s->standardization.feature_std.assign(kFeatures, 1.0);
  return s;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since)
      .count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

enum class Form { kPerRow, kPackedF64, kPackedF32 };

struct Timing {
  std::vector<double> encode, call, decode;
  size_t request_bytes = 0, response_bytes = 0;
};

int Main() {
  const std::string server = absl::GetFlag(FLAGS_server);
  BNN_CHECK(!server.empty());
  const int n = absl::GetFlag(FLAGS_rows);
  const int samples = absl::GetFlag(FLAGS_samples);
  auto target = GrpcTarget::Start(server, absl::GetFlag(FLAGS_server_args));
  BNN_CHECK_OK(target.status());
  auto id = (*target)->Import(*UciSnapshot());
  BNN_CHECK_OK(id.status());
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  auto stub = v1::BnnService::NewStub(grpc::CreateCustomChannel(
      (*target)->address(), grpc::InsecureChannelCredentials(), args));

  Rng rng(5);
  std::vector<double> x(static_cast<size_t>(n) * kFeatures);
  for (double& v : x) v = rng.Normal();

  std::printf("Predict of %d rows x %d features, %d samples, 8-50-50-1 net\n",
              n, kFeatures, samples);
  std::printf("%-26s %9s %9s %9s %12s %12s\n", "form", "encode_ms", "call_ms",
              "decode_ms", "request_B", "response_B");
  for (const Form form : {Form::kPerRow, Form::kPackedF64, Form::kPackedF32}) {
    for (const bool packed_response : {false, true}) {
      Timing t;
      std::vector<double> mean, variance;
      for (int r = 0; r <= absl::GetFlag(FLAGS_repeats); ++r) {
        auto start = std::chrono::steady_clock::now();
        v1::PredictRequest request;
        request.set_snapshot_id(*id);
        request.set_num_samples(samples);
        request.set_seed(1);
        request.set_packed_response(packed_response);
        if (form == Form::kPerRow) {
          request.mutable_rows()->Reserve(n);
          for (int i = 0; i < n; ++i) {
            request.add_rows()->mutable_x()->Add(
                x.begin() + i * kFeatures, x.begin() + (i + 1) * kFeatures);
          }
        } else {
          v1::Tensor* features = request.mutable_features();
          features->add_shape(n);
          features->add_shape(kFeatures);
          if (form == Form::kPackedF64) {
            features->mutable_f64()->Add(x.begin(), x.end());
          } else {
            features->mutable_f32()->Reserve(static_cast<int>(x.size()));
            for (const double v : x) {
              features->add_f32(static_cast<float>(v));
            }
          }
        }
        std::string wire;
        request.SerializeToString(&wire);
        const double encode = Seconds(start);

        start = std::chrono::steady_clock::now();
        grpc::ClientContext context;
        v1::PredictResponse response;
        const grpc::Status status = stub->Predict(&context, request, &response);
        BNN_CHECK(status.ok());
        const double call = Seconds(start);

        std::string response_wire;
        response.SerializeToString(&response_wire);
        start = std::chrono::steady_clock::now();
        v1::PredictResponse parsed;
        BNN_CHECK(parsed.ParseFromString(response_wire));
        if (packed_response) {
          mean.assign(parsed.packed().mean().f64().begin(),
                      parsed.packed().mean().f64().end());
          variance.assign(parsed.packed().variance().f64().begin(),
                          parsed.packed().variance().f64().end());
        } else {
          mean.resize(n);
          variance.resize(n);
          for (int i = 0; i < n; ++i) {
            mean[i] = parsed.predictions(i).mean();
            variance[i] = parsed.predictions(i).variance();
          }
        }
        const double decode = Seconds(start);
        BNN_CHECK(static_cast<int>(mean.size()) == n);
        if (r == 0) continue;  // warm-up
        t.encode.push_back(encode);
        t.call.push_back(call);
        t.decode.push_back(decode);
        t.request_bytes = wire.size();
        t.response_bytes = response_wire.size();
      }
      const char* name = form == Form::kPerRow      ? "per-row"
                         : form == Form::kPackedF64 ? "packed f64"
                                                    : "packed f32";
      std::printf("%-12s -> %-11s %9.1f %9.1f %9.1f %12zu %12zu\n", name,
                  packed_response ? "packed" : "per-row",
                  1e3 * Median(t.encode), 1e3 * Median(t.call),
                  1e3 * Median(t.decode), t.request_bytes, t.response_bytes);
    }
  }
  return 0;
}

}  // namespace
}  // namespace bnn::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return bnn::bench::Main();
}
