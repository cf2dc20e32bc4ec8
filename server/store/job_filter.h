// Which jobs a listing returns (MetadataReader::ListJobs, JobStore).
#ifndef BNN_SERVER_STORE_JOB_FILTER_H_
#define BNN_SERVER_STORE_JOB_FILTER_H_

#include <string>
#include <vector>

#include "store/store.pb.h"

namespace bnn::server {

// Empty fields match every job.
struct JobFilter {
  // Any of these states.
  std::vector<store::JobRecord::State> states;
  std::string dataset_id;
  std::string method;
  std::string model_name;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_JOB_FILTER_H_
