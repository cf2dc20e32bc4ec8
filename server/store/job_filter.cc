#include "server/store/job_filter.h"

#include <algorithm>

namespace bnn::server {

bool JobFilter::Matches(const store::JobRecord& job) const {
  if (!states.empty() &&
      std::find(states.begin(), states.end(), job.state()) == states.end()) {
    return false;
  }
  return (dataset_id.empty() || job.dataset_id() == dataset_id) &&
         (method.empty() || job.method() == method) &&
         (model_name.empty() || job.model_name() == model_name);
}

}  // namespace bnn::server
