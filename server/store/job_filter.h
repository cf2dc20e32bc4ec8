// Which jobs a listing returns: shared by the record-file JobStore and the
// MetadataStore backends.
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

  bool Matches(const store::JobRecord& job) const;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_STORE_JOB_FILTER_H_
