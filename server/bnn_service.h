// The gRPC service: thin handlers that validate a request, call the stores,
// the job runner or the core, convert the status once (ToGrpcStatus), record
// metrics and log failures.
#ifndef BNN_SERVER_BNN_SERVICE_H_
#define BNN_SERVER_BNN_SERVICE_H_

#include <absl/status/status.h>
#include <absl/strings/string_view.h>
#include <absl/time/time.h>
#include <grpcpp/grpcpp.h>

#include "bnn/methods/registry.h"
#include "bnn/v1/bnn_service.grpc.pb.h"

#include "server/job_runner.h"
#include "server/metrics/server_metrics.h"
#include "server/request_validation.h"
#include "server/store/dataset_store.h"
#include "server/store/snapshot_store.h"
#include "server/thread_pool.h"

namespace bnn::server {

class BnnServiceImpl final : public v1::BnnService::CallbackService {
 public:
  struct Options {
    ServerLimits limits;
    // OpenMP threads per Predict call (--threads); 0 = OpenMP default.
    int compute_threads = 0;
  };

  // Every pointer is borrowed and must outlive the service, which must
  // outlive the grpc::Server it is registered with.
  BnnServiceImpl(const Options& options, DatasetStore* datasets,
                 SnapshotStore* snapshots, JobRunner* jobs,
                 const MethodRegistry* registry, ServerMetrics* metrics);

  grpc::ServerReadReactor<v1::UploadDatasetRequest>* UploadDataset(
      grpc::CallbackServerContext* context,
      v1::UploadDatasetResponse* response) override;
  grpc::ServerUnaryReactor* GetDataset(grpc::CallbackServerContext* context,
                                       const v1::GetDatasetRequest* request,
                                       v1::DatasetInfo* response) override;
  grpc::ServerUnaryReactor* ListDatasets(
      grpc::CallbackServerContext* context,
      const v1::ListDatasetsRequest* request,
      v1::ListDatasetsResponse* response) override;
  grpc::ServerUnaryReactor* StartTraining(
      grpc::CallbackServerContext* context,
      const v1::StartTrainingRequest* request,
      v1::StartTrainingResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const v1::GetJobRequest* request,
                                   v1::Job* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const v1::PredictRequest* request,
                                    v1::PredictResponse* response) override;
  grpc::ServerUnaryReactor* ListMethods(
      grpc::CallbackServerContext* context,
      const v1::ListMethodsRequest* request,
      v1::ListMethodsResponse* response) override;

 private:
  class UploadReactor;

  absl::Status DoGetDataset(const v1::GetDatasetRequest& request,
                            v1::DatasetInfo* response);
  absl::Status DoListDatasets(v1::ListDatasetsResponse* response);
  absl::Status DoStartTraining(const v1::StartTrainingRequest& request,
                               v1::StartTrainingResponse* response);
  absl::Status DoGetJob(const v1::GetJobRequest& request, v1::Job* response);
  absl::Status DoCancelJob(const v1::CancelJobRequest& request,
                           v1::Job* response);
  absl::Status DoPredict(const v1::PredictRequest& request,
                         v1::PredictResponse* response);
  absl::Status DoListMethods(v1::ListMethodsResponse* response);

  // Metrics and, on failure, a log line for one finished RPC.
  void RecordOutcome(grpc::CallbackServerContext* context,
                     absl::string_view rpc, absl::Time start,
                     const absl::Status& status);
  // Finishes a unary RPC with `status` and returns its reactor.
  grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context,
                                   absl::string_view rpc, absl::Time start,
                                   const absl::Status& status);

  const Options options_;
  DatasetStore* const datasets_;
  SnapshotStore* const snapshots_;
  JobRunner* const jobs_;
  const MethodRegistry* const registry_;
  ServerMetrics* const metrics_;
  // Completes uploads (label encoding, hashing, the durable write) so that
  // no reaction blocks on them.
  ThreadPool upload_pool_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_BNN_SERVICE_H_
