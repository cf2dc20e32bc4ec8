#!/usr/bin/env bash
# Installs every Debian 12 package bnn-serve needs. Idempotent: when all are
# present it does nothing (no apt-get update, no network).
#
#   deploy/install-deps.sh            build + test + demo packages (default)
#   deploy/install-deps.sh --build    only what configuring with
#                                     -DBNN_BUILD_TESTS=OFF -DBNN_BUILD_BENCH=OFF
#                                     and building bnn-server and bnnctl needs
#                                     (the Dockerfile's build stage)
#   deploy/install-deps.sh --runtime  only the shared libraries bnn-server and
#                                     bnnctl link against (Docker runtime stage)
#   deploy/install-deps.sh --peers    the PyTorch peers of the benchmarks
#                                     (bench/peers/; not needed by any test)
set -euo pipefail

# What the image's build stage needs: no test, benchmark or plotting
# packages. python3 only because CMake finds an interpreter for the Python
# package's stub generator (client/python/) at configure time; git is left
# out (the image's build commit is "unknown": .dockerignore drops .git).
BUILD_ONLY_PACKAGES=(
  build-essential cmake ninja-build pkg-config python3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libeigen3-dev libabsl-dev libspdlog-dev libfmt-dev zlib1g-dev
  # Metrics (prometheus-cpp's core: families, text format) and the HTTP
  # endpoint of /metrics, /healthz and /readyz (civetweb, which the package
  # brings as libcivetweb-dev).
  prometheus-cpp-dev
  # Bearer tokens (SHA-256, CSPRNG) and TLS certificate checks; the tests
  # make their certificates with the openssl tool.
  libssl-dev
  # The metadata store (server/store/sqlite_metadata_store.h) and its
  # PostgreSQL backend for replicas sharing one store (libpq,
  # server/store/postgres_metadata_store.h).
  libsqlite3-dev libpq-dev
  # bnnctl: --json output (nlohmann-json) and its command line (CLI11); the
  # tests parse that output with the same JSON parser, and bnn-server writes
  # --log-format=json lines with it. Both are header-only.
  nlohmann-json3-dev libcli11-dev
  # Weight samples for prediction: the Philox counter-based generator
  # (bnn::CounterRng). Header-only.
  librandom123-dev
  # --job-runner=kubernetes: the Kubernetes API over HTTPS
  # (server/jobs/kubernetes/api_client.h).
  libcurl4-openssl-dev
)
BUILD_PACKAGES=(
  "${BUILD_ONLY_PACKAGES[@]}"
  ccache git ca-certificates
  libgtest-dev libgmock-dev libbenchmark-dev
  # Integration tests and the demo: data generation, metrics scraping.
  python3 curl prometheus
  # The PostgreSQL metadata store's tests start a real server (initdb,
  # postgres: tests/test_util/postgres_server.h); they fail without it.
  postgresql
  # bnn_client_test makes TLS certificates at test time.
  openssl
  # bench/fuzz/run.sh: the fuzz targets under libFuzzer with ASan/UBSan
  # (clang, its sanitizer and fuzzer runtimes, and its OpenMP).
  clang libclang-rt-dev libomp-dev
  # BALI classification experiments (docs/results/bali/): Fashion-MNIST, the
  # OOD sets (bench/accuracy/make_ood_sets.py) and the plots.
  dataset-fashion-mnist python3-sklearn python3-matplotlib
  # The Python package bnn_serve (client/python/) and its tests: Debian's
  # gRPC, protobuf and numpy modules, tqdm (progress bars), matplotlib
  # (bnn_serve.plot), pytest, and pip/setuptools/venv for `pip install
  # client/python`. Its stubs are generated with protoc and
  # grpc_python_plugin (protobuf-compiler-grpc, above), not with
  # python3-grpc-tools, whose bundled protoc 3.5.1 is too old for the
  # proto's `optional` fields; grpc-tools is what users generating stubs of
  # their own protos use, e.g. the Open Inference Protocol client test
  # (tests/server/inference_v2/python_client_test.py), whose proto it can
  # compile.
  python3-grpcio python3-grpc-tools python3-protobuf python3-numpy
  python3-tqdm python3-pytest python3-pip python3-setuptools python3-wheel
  python3-venv
  # tests/deploy/: the Kubernetes manifests checked against the API models of
  # the Kubernetes Python client, parsed with PyYAML (promtool comes with the
  # prometheus package, above).
  python3-kubernetes python3-yaml
)
# bench/peers/: the PyTorch peers of the performance report (issue 15), on
# OpenBLAS (never the reference BLAS). Large, and needed by no test: only
# with --peers.
PEER_PACKAGES=(python3-torch libopenblas0-pthread python3-numpy)
RUNTIME_PACKAGES=(
  libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libspdlog1.10
  libfmt9 zlib1g libgomp1 ca-certificates
  # /metrics, /healthz, /readyz: prometheus-cpp's core and civetweb.
  libprometheus-cpp-core1.0 libcivetweb1
  libssl3
  libsqlite3-0 libpq5
  # The Kubernetes job launcher's HTTPS client.
  libcurl4
)

packages=("${BUILD_PACKAGES[@]}")
if [[ "${1:-}" == "--runtime" ]]; then
  packages=("${RUNTIME_PACKAGES[@]}")
elif [[ "${1:-}" == "--build" ]]; then
  packages=("${BUILD_ONLY_PACKAGES[@]}")
elif [[ "${1:-}" == "--peers" ]]; then
  packages=("${PEER_PACKAGES[@]}")
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--build|--runtime|--peers]" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update
"${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
