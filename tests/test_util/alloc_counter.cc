#include "tests/test_util/alloc_counter.h"

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <malloc.h>

// glibc's allocator under its internal names; the wrappers below replace the
// public ones for the whole process (the executable's definitions take
// precedence over libc's in symbol resolution).
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* ptr, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* ptr);
}

namespace {

std::atomic<int64_t> in_use{0};
std::atomic<int64_t> peak{0};

void Track(void* ptr) {
  if (ptr == nullptr) return;
  const int64_t now =
      in_use.fetch_add(static_cast<int64_t>(malloc_usable_size(ptr))) +
      static_cast<int64_t>(malloc_usable_size(ptr));
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
}

void Untrack(void* ptr) {
  if (ptr != nullptr) {
    in_use.fetch_sub(static_cast<int64_t>(malloc_usable_size(ptr)));
  }
}

}  // namespace

extern "C" {

void* malloc(size_t size) {
  void* p = __libc_malloc(size);
  Track(p);
  return p;
}

void* calloc(size_t count, size_t size) {
  void* p = __libc_calloc(count, size);
  Track(p);
  return p;
}

void* realloc(void* ptr, size_t size) {
  Untrack(ptr);
  void* p = __libc_realloc(ptr, size);
  if (p == nullptr && size != 0) {
    Track(ptr);  // the old block is still allocated
    return nullptr;
  }
  Track(p);
  return p;
}

void free(void* ptr) {
  Untrack(ptr);
  __libc_free(ptr);
}

void* memalign(size_t alignment, size_t size) {
  void* p = __libc_memalign(alignment, size);
  Track(p);
  return p;
}

void* aligned_alloc(size_t alignment, size_t size) {
  return memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  void* p = memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

}  // extern "C"

namespace bnn::testing {

int64_t HeapBytesInUse() { return in_use.load(); }
int64_t HeapPeakBytes() { return peak.load(); }
void ResetHeapPeak() { peak.store(in_use.load()); }

}  // namespace bnn::testing
