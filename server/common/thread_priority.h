// Per-thread CPU priority (Linux nice values are per thread).
#ifndef BNN_SERVER_COMMON_THREAD_PRIORITY_H_
#define BNN_SERVER_COMMON_THREAD_PRIORITY_H_

namespace bnn::server {

// Lowers the calling thread's CPU priority to nice value `nice` (0..19;
// Linux keeps it per thread, and threads the calling thread starts, such as
// its OpenMP workers, inherit it). Training calls it, so that serving
// threads (gRPC, the compute pool) get the cores first when both want them
// and training runs at full speed when serving is idle; the compute pool
// calls it for calls that have computed for long (ThreadPool::Options::
// demote_after). Never raises priority (an unprivileged thread cannot): a
// thread already nicer keeps its value. Returns the nice value in effect.
int LowerThreadPriority(int nice);

// The calling thread's nice value.
int ThreadNice();

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_THREAD_PRIORITY_H_
