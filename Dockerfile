# syntax=docker/dockerfile:1
#
# bnn-serve image: bnn-server, bnn-train and bnnctl on Debian 12, running as
# an unprivileged user. The same image serves (bnn-server, the entrypoint)
# and trains one job in a Kubernetes Job's pod (--job-runner=kubernetes: the
# launcher runs the command bnn-train). Build and run:
#
#   docker build -t bnn-serve .
#   docker run --rm --entrypoint bnnctl bnn-serve token create --scopes admin
#   (put the printed sha256:... line into ./tokens)
#   docker run -d --name bnn -p 50051:50051 -p 9464:9464 \
#       -v bnn-data:/var/lib/bnn -v "$PWD/tokens:/run/secrets/bnn-tokens:ro" \
#       bnn-serve
#
# The server listens on every interface, so it asks for bearer tokens: the
# token file (hashes only) is read from /run/secrets/bnn-tokens, and the
# server refuses to start without it. Append
# "--token-file= --allow-unauthenticated" to run without tokens on purpose.
#
# Both stages install packages with deploy/install-deps.sh, so the image uses
# exactly the Debian packages the build and CI use: the build stage only
# those the build needs (--build: no test, benchmark or plotting packages),
# the runtime stage only the shared libraries (--runtime: no compiler).
# Without Docker, deploy/container-check.sh builds and runs this file with
# podman; docs/deploy.md walks through single-node, compose and Kubernetes.

# ---- build -----------------------------------------------------------------
FROM debian:bookworm AS build

# Copied alone first so the dependency layer is cached across source changes.
COPY deploy/install-deps.sh /src/deploy/install-deps.sh
RUN /src/deploy/install-deps.sh --build && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .
# BNN_NATIVE=OFF: the image must run on any x86-64 host, not only on a CPU
# like the build machine's. Tests and benchmarks OFF: their packages
# (GoogleTest, Google Benchmark) are not installed in this stage.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DBNN_NATIVE=OFF -DBNN_BUILD_TESTS=OFF -DBNN_BUILD_BENCH=OFF \
 && cmake --build /build --parallel "$(nproc)" \
      --target bnn-server bnn-train bnnctl \
 && install -D -m 0755 -s /build/server/bnn-server /out/bnn-server \
 && install -D -m 0755 -s /build/server/bnn-train /out/bnn-train \
 && install -D -m 0755 -s /build/client/bnnctl /out/bnnctl

# ---- runtime ---------------------------------------------------------------
FROM debian:bookworm

# OCI annotations (https://specs.opencontainers.org/image-spec/annotations/).
# VERSION and REVISION are set by the builder, e.g.
#   --build-arg REVISION="$(git rev-parse HEAD)" (deploy/container-check.sh).
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="bnn-serve" \
      org.opencontainers.image.description="gRPC service that trains Bayesian neural networks and serves their predictive uncertainty (bnn-server, bnn-train, bnnctl)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="debian:bookworm" \
      org.opencontainers.image.documentation="docs/deploy.md"

# /var/lib/bnn-blobs: the --blob-dir of the shared-store layout
# (deploy/compose/compose.yaml); a new volume mounted there takes the bnn
# user's ownership from the image.
COPY deploy/install-deps.sh /tmp/install-deps.sh
RUN /tmp/install-deps.sh --runtime \
 && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh \
 && groupadd --system --gid 10001 bnn \
 && useradd --system --uid 10001 --gid bnn --home-dir /var/lib/bnn \
      --no-create-home --shell /usr/sbin/nologin bnn \
 && install -d -o bnn -g bnn -m 0750 /var/lib/bnn \
 && install -d -o bnn -g bnn -m 0750 /var/lib/bnn-blobs

COPY --from=build /out/bnn-server /out/bnn-train /out/bnnctl /usr/local/bin/

USER bnn:bnn
WORKDIR /var/lib/bnn
# The store: datasets, jobs and snapshots survive container restarts.
VOLUME /var/lib/bnn
# gRPC; the metrics port (/metrics for Prometheus, /healthz and /readyz for
# orchestrators; plain HTTP: with --tls-cert, move it to loopback).
EXPOSE 50051 9464

# The gRPC health service needs no token. With --tls-cert, replace this
# check (docker run --health-cmd ...).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["bnnctl", "--server", "127.0.0.1:50051", "--timeout", "3", "health"]

ENTRYPOINT ["bnn-server", "--listen", "0.0.0.0:50051", \
            "--data-dir", "/var/lib/bnn", "--metrics-listen", "0.0.0.0:9464", \
            "--token-file", "/run/secrets/bnn-tokens"]
