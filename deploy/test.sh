#!/usr/bin/env bash
# README command 2 (and all of CI, via .ci/run): installs the dependencies,
# configures and builds everything (core, server, client, tests, benchmarks)
# in build-test/, then runs the whole CTest suite.
#
#   deploy/test.sh                 # from anywhere inside the repository
#   BNN_TEST_BUILD_DIR=dir deploy/test.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

deploy/install-deps.sh

build_dir="${BNN_TEST_BUILD_DIR:-build-test}"
# -g1 (line tables only) keeps backtraces readable while the 90 statically
# linked test programs stay ~1/6 of their -g size (6.4 GB -> ~1 GB of build).
configure=(-S . -B "${build_dir}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
  -DBNN_BUILD_TESTS=ON -DBNN_BUILD_BENCH=ON)
# The generator of an existing build directory cannot change; pick Ninja only
# for a fresh one.
if [[ ! -f "${build_dir}/CMakeCache.txt" ]] && command -v ninja >/dev/null; then
  configure+=(-G Ninja)
fi
cmake "${configure[@]}"
cmake --build "${build_dir}" --parallel "$(nproc)"

# Every test binary is one CTest entry; two run at a time (each test pins
# OpenMP to one thread, see tests/CMakeLists.txt).
ctest --test-dir "${build_dir}" --output-on-failure -j2
