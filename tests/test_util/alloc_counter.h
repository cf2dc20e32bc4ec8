// Counts the heap bytes of this process: linking alloc_counter.cc into a test
// binary replaces malloc and friends with wrappers around glibc's allocator
// that track the bytes in use and their peak. Everything allocates through
// them: operator new, Eigen (aligned malloc), OpenMP. For checking memory
// estimates against what a computation really allocates.
#ifndef BNN_TESTS_TEST_UTIL_ALLOC_COUNTER_H_
#define BNN_TESTS_TEST_UTIL_ALLOC_COUNTER_H_

#include <cstdint>

namespace bnn::testing {

// Bytes currently allocated (usable sizes of live blocks).
int64_t HeapBytesInUse();
// The largest HeapBytesInUse() since the last ResetHeapPeak().
int64_t HeapPeakBytes();
void ResetHeapPeak();

}  // namespace bnn::testing

#endif  // BNN_TESTS_TEST_UTIL_ALLOC_COUNTER_H_
