#include "server/common/thread_priority.h"

#include <algorithm>
#include <cerrno>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bnn::server {
namespace {

id_t ThreadId() { return static_cast<id_t>(syscall(SYS_gettid)); }

}  // namespace

int ThreadNice() {
  // PRIO_PROCESS with a thread id addresses that thread alone on Linux.
  errno = 0;
  const int current = getpriority(PRIO_PROCESS, ThreadId());
  return errno == 0 ? current : 0;
}

int LowerThreadPriority(int nice) {
  const int current = ThreadNice();
  const int wanted = std::clamp(nice, 0, 19);
  if (wanted <= current) return current;
  return setpriority(PRIO_PROCESS, ThreadId(), wanted) == 0 ? wanted : current;
}

}  // namespace bnn::server
