#include "server/jobs/compute_threads.h"

#include <algorithm>
#include <cerrno>
#include <omp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bnn::server {

void UseComputeThreads(int num_threads) {
  omp_set_num_threads(num_threads > 0 ? num_threads : omp_get_num_procs());
}

int LowerThreadPriority(int nice) {
  // PRIO_PROCESS with a thread id addresses that thread alone on Linux.
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return 0;
  const int wanted = std::clamp(nice, 0, 19);
  if (wanted <= current) return current;
  return setpriority(PRIO_PROCESS, tid, wanted) == 0 ? wanted : current;
}

}  // namespace bnn::server
