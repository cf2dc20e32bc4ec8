// Bounds the client streams a server keeps open: at most `max_streams` at
// once, and one that has waited for its client's next message longer than
// `idle_timeout` is told to end (Stream::OnIdle), so that idle or abandoned
// clients cannot hold slots, file handles and buffers forever.
#ifndef BNN_SERVER_COMMON_STREAM_WATCH_H_
#define BNN_SERVER_COMMON_STREAM_WATCH_H_

#include <set>
#include <thread>

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

namespace bnn::server {

// Thread-safe.
class StreamWatch {
 public:
  // A watched stream.
  class Stream {
   public:
    // When the stream started waiting for its client's next message, or
    // absl::InfiniteFuture() while it is not waiting (working on a message,
    // committing, finished).
    virtual absl::Time WaitingSince() const = 0;
    // Called once the stream has waited longer than the idle timeout, from
    // the watch's thread while it holds its lock (so the stream cannot be
    // removed meanwhile): must end the stream without calling back into the
    // watch.
    virtual void OnIdle() = 0;

   protected:
    ~Stream() = default;
  };

  // max_streams >= 1, idle_timeout > 0.
  StreamWatch(int max_streams, absl::Duration idle_timeout);
  // Stops the watch's thread; every stream must have been removed.
  ~StreamWatch();
  StreamWatch(const StreamWatch&) = delete;
  StreamWatch& operator=(const StreamWatch&) = delete;

  // Watches `stream`; false (and not watched) if max_streams are watched.
  bool Add(Stream* stream);
  // Stops watching `stream` before it is destroyed.
  void Remove(Stream* stream);

  int max_streams() const { return max_streams_; }
  absl::Duration idle_timeout() const { return idle_timeout_; }
  int size() const;

 private:
  void Run();

  const int max_streams_;
  const absl::Duration idle_timeout_;
  mutable absl::Mutex mu_;
  std::set<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  // Streams told to end, not watched for idleness again.
  std::set<Stream*> ended_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace bnn::server

#endif  // BNN_SERVER_COMMON_STREAM_WATCH_H_
