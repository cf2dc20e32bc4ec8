#!/usr/bin/env bash
# README command 2 (and all of CI, via .ci/run): installs the dependencies,
# checks the C/C++ formatting, builds everything (core, server, client,
# tests, benchmarks) with warnings as errors in build-test/ and runs the
# whole CTest suite, then builds the tests again under AddressSanitizer and
# UndefinedBehaviorSanitizer in build-test-asan/ and runs them there.
#
#   deploy/test.sh                 # from anywhere inside the repository
#   BNN_TEST_BUILD_DIR=dir deploy/test.sh   # dir and dir-asan
#   BNN_TEST_SANITIZERS=0 deploy/test.sh    # skip the sanitizer pass
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

deploy/install-deps.sh

# 1. Formatting: no C/C++ file that clang-format (.clang-format) would change.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t sources < <(git ls-files '*.cc' '*.h')
else
  mapfile -t sources < <(find core server client tests bench \
    \( -name '*.cc' -o -name '*.h' \) -not -path '*/build*')
fi
echo "test.sh: checking the format of ${#sources[@]} C++ files"
clang-format --dry-run --Werror "${sources[@]}"

build_dir="${BNN_TEST_BUILD_DIR:-build-test}"
# $1: build directory; the rest: cmake options.
configure() {
  local dir="$1"
  shift
  local args=(-S . -B "${dir}" "$@")
  # The generator of an existing build directory cannot change; pick Ninja
  # only for a fresh one.
  if [[ ! -f "${dir}/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
    args+=(-G Ninja)
  fi
  cmake "${args[@]}"
}

# 2. Everything, warnings as errors. -g1 (line tables only) keeps backtraces
# readable while the ~95 statically linked test programs stay ~1/6 of their
# -g size (6.4 GB -> ~1.5 GB of build).
configure "${build_dir}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  -DBNN_WERROR=ON -DBNN_BUILD_TESTS=ON -DBNN_BUILD_BENCH=ON
cmake --build "${build_dir}" --parallel "$(nproc)"
# Every test binary is one CTest entry; two run at a time (each test pins
# OpenMP to one thread, see tests/CMakeLists.txt).
ctest --test-dir "${build_dir}" --output-on-failure -j2

# 3. The tests again under ASan + UBSan (undefined behaviour aborts): -O1
# for a build about as fast as -O2's and usable stack traces; no benchmarks,
# experiments or end-to-end tests (tests/CMakeLists.txt says why). The fuzz smoke runs are left to the first pass (their
# mutation counts are sized for an optimised build; bench/fuzz/run.sh fuzzes
# under the sanitizers).
# allocator_may_return_null: an allocation too large for the machine throws
# std::bad_alloc as in the first pass (a job fails, not the server) instead
# of aborting. tests/sanitizer/lsan.supp: leaks inside system libraries.
# Tests whose claims are an optimised build's timing or a plain heap's RSS
# skip themselves here (BNN_SKIP_IF_SANITIZED, tests/test_util/test_util.h).
if [[ "${BNN_TEST_SANITIZERS:-1}" != 0 ]]; then
  asan_dir="${build_dir}-asan"
  configure "${asan_dir}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    -DBNN_SANITIZE=ON -DBNN_WERROR=ON -DBNN_BUILD_TESTS=ON \
    -DBNN_BUILD_BENCH=OFF
  cmake --build "${asan_dir}" --parallel "$(nproc)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
    LSAN_OPTIONS="suppressions=${PWD}/tests/sanitizer/lsan.supp" \
    UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "${asan_dir}" --output-on-failure -j2 -LE fuzz
fi
