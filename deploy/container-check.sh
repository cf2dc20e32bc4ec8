#!/usr/bin/env bash
# Builds the bnn-serve image from the Dockerfile with podman and checks it for
# real (issue 14, docs/deploy.md, results in docs/results/container.md):
#
#   1. base    debian:bookworm made from Debian packages (mmdebstrap
#              --variant=minbase bookworm | podman import), as no image
#              registry is reachable; skipped when the image exists.
#   2. build   podman build of the Dockerfile (compiles the whole project:
#              ~30 min on 2 cores; not run by CI).
#   3. image   OCI labels, non-root user, HEALTHCHECK, volume, no compiler.
#   4. run     refuses to start without a token file (safe default); then
#              started with a volume, a token file and published loopback
#              ports; the quickstart flow with the host's bnnctl (upload,
#              train, publish, predict, /metrics); the HEALTHCHECK runs
#              healthy; the process runs as uid 10001.
#   5. restart the container restarts and the volume kept the data.
#   6. compose podman-compose brings up bnn-server, PostgreSQL and Prometheus of
#              deploy/compose/compose.yaml (locally built images) and a PromQL
#              query on the scraped server answers. Grafana (not packaged by
#              Debian, no registry here) is left out; its dashboard is checked
#              by tests/deploy/prometheus_test.py.
#
#   deploy/container-check.sh [STEP...]     default: all six, in order
#
# A quicker check, not in the default steps: `prebuilt` instead of `build`
# makes IMAGE from the Dockerfile's runtime stage as written, with the
# host's bnn-server, bnn-train and bnnctl (HOST_BUILD, default build-test/) copied in
# place of the build stage's; it checks everything but the compile stage
# in a few minutes (the host must be Debian 12, like the image):
#   deploy/container-check.sh base prebuilt image run restart compose
#
# Needs (Debian): podman runc mmdebstrap podman-compose curl python3, and for
# the compose services to find each other by name, with podman's CNI network
# backend (the default without netavark),
# golang-github-containernetworking-plugin-dnsname.
#
# Settings (environment), all overridable:
#   PODMAN           podman binary (podman)
#   PODMAN_RUNTIME   OCI runtime (runc: these machines need it)
#   PODMAN_ULIMITS   space-separated ulimits for build and run
#                    ("nofile=4096:4096 nproc=4096:4096")
#   BUILD_FORMAT     podman build --format (docker: the OCI image format has
#                    no HEALTHCHECK, podman drops it there)
#   BASE_IMAGE       the base image name the Dockerfile uses (debian:bookworm)
#   DEBIAN_MIRROR    mmdebstrap's mirror (empty: its default)
#   IMAGE            the image built (localhost/bnn-serve:check)
#   BNNCTL           the host's bnnctl (build/client/bnnctl, else
#                    build-test/client/bnnctl)
#   GRPC_PORT, METRICS_PORT   host loopback ports of step 4 (15051, 19464)
#   HOST_BUILD       the host build tree of the prebuilt step (build-test)
#   KEEP=1           keep the containers and volumes for inspection
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PODMAN="${PODMAN:-podman}"
PODMAN_RUNTIME="${PODMAN_RUNTIME:-runc}"
PODMAN_ULIMITS="${PODMAN_ULIMITS:-nofile=4096:4096 nproc=4096:4096}"
BUILD_FORMAT="${BUILD_FORMAT:-docker}"
BASE_IMAGE="${BASE_IMAGE:-debian:bookworm}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-}"
IMAGE="${IMAGE:-localhost/bnn-serve:check}"
GRPC_PORT="${GRPC_PORT:-15051}"
METRICS_PORT="${METRICS_PORT:-19464}"
KEEP="${KEEP:-0}"
HOST_BUILD="${HOST_BUILD:-build-test}"
if [[ -z "${BNNCTL:-}" ]]; then
  BNNCTL=build/client/bnnctl
  [[ -x "${BNNCTL}" ]] || BNNCTL=build-test/client/bnnctl
fi

readonly CONTAINER=bnn-check
readonly VOLUME=bnn-check-data
readonly COMPOSE_PROJECT=bnn-check

# Flags every podman build and run gets, from the settings above.
PODMAN_FLAGS=(--runtime "${PODMAN_RUNTIME}")
for limit in ${PODMAN_ULIMITS}; do PODMAN_FLAGS+=(--ulimit "${limit}"); done

work="$(mktemp -d)"
summary="${work}/summary.md"
# podman-compose runs podman itself: the same runtime and ulimits reach it
# through a containers.conf of the settings.
{
  echo "[containers]"
  printf 'default_ulimits = ['
  sep=""
  for limit in ${PODMAN_ULIMITS}; do printf '%s"%s"' "${sep}" "${limit}"; sep=", "; done
  echo "]"
  echo "[engine]"
  echo "runtime = \"${PODMAN_RUNTIME}\""
} >"${work}/containers.conf"

cleanup() {
  if [[ "${KEEP}" != 1 ]]; then
    "${PODMAN}" rm -f "${CONTAINER}" "${CONTAINER}-notoken" >/dev/null 2>&1 || true
    "${PODMAN}" volume rm -f "${VOLUME}" >/dev/null 2>&1 || true
    if [[ -f "${work}/compose-up" ]]; then
      (cd deploy/compose && CONTAINERS_CONF="${work}/containers.conf" \
        podman-compose -p "${COMPOSE_PROJECT}" down -v >/dev/null 2>&1) || true
      "${PODMAN}" network rm -f "${COMPOSE_PROJECT}_bnn" >/dev/null 2>&1 || true
      rm -f deploy/compose/tokens deploy/compose/postgres.env
    fi
  fi
  echo "work directory (logs, summary): ${work}"
}
trap cleanup EXIT

step() { printf '\n==> %s\n' "$*"; }
record() { echo "- $*" | tee -a "${summary}"; }
fail() { echo "FAILED: $*" >&2; record "FAILED: $*"; exit 1; }
seconds_since() { echo $(($(date +%s) - $1)); }

# Waits until `bnnctl health` answers SERVING at $1, at most $2 seconds.
wait_healthy() {
  local address="$1" limit="$2"
  for _ in $(seq "$((limit * 2))"); do
    if "${BNNCTL}" --server "${address}" --timeout 2 health >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.5
  done
  return 1
}

step_base() {
  step "Base image ${BASE_IMAGE} from Debian packages"
  if "${PODMAN}" image exists "${BASE_IMAGE}"; then
    record "base: ${BASE_IMAGE} already present (not rebuilt)"
    return
  fi
  local start suite="${BASE_IMAGE#*:}"
  start=$(date +%s)
  mmdebstrap --variant=minbase "${suite}" - ${DEBIAN_MIRROR:+"${DEBIAN_MIRROR}"} \
    | "${PODMAN}" import - "${BASE_IMAGE}"
  "${PODMAN}" run --rm "${PODMAN_FLAGS[@]}" "${BASE_IMAGE}" \
    cat /etc/debian_version >"${work}/debian_version"
  record "base: mmdebstrap --variant=minbase ${suite} | podman import -> ${BASE_IMAGE} in $(seconds_since "${start}") s (Debian $(cat "${work}/debian_version"))"
}

step_build() {
  step "Building ${IMAGE} (compiles bnn-server, bnn-train and bnnctl)"
  local start revision
  start=$(date +%s)
  revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
  "${PODMAN}" build "${PODMAN_FLAGS[@]}" --format "${BUILD_FORMAT}" --build-arg "REVISION=${revision}" \
    -t "${IMAGE}" -f Dockerfile . >"${work}/build.log" 2>&1 \
    || { tail -n 40 "${work}/build.log" >&2; fail "podman build (log ${work}/build.log)"; }
  record "build: podman build of ${revision:0:12} in $(seconds_since "${start}") s; image $("${PODMAN}" image inspect --format '{{.Size}}' "${IMAGE}") bytes"
}

step_prebuilt() {
  step "Building ${IMAGE} from the Dockerfile's runtime stage with ${HOST_BUILD}'s binaries"
  local context="${work}/prebuilt" start
  start=$(date +%s)
  mkdir -p "${context}/deploy" "${context}/out"
  cp deploy/install-deps.sh "${context}/deploy/"
  strip -o "${context}/out/bnn-server" "${HOST_BUILD}/server/bnn-server"
  strip -o "${context}/out/bnn-train" "${HOST_BUILD}/server/bnn-train"
  strip -o "${context}/out/bnnctl" "${HOST_BUILD}/client/bnnctl"
  chmod 0755 "${context}/out/bnn-server" "${context}/out/bnn-train" \
    "${context}/out/bnnctl"
  # The runtime stage, its COPY --from=build taking the files from the context.
  sed -n '/^# ---- runtime/,$p' Dockerfile \
    | sed 's|^COPY --from=build /out/|COPY out/|; s| /out/bnn-train| out/bnn-train|; s| /out/bnnctl| out/bnnctl|' \
    >"${context}/Dockerfile"
  grep -q '^COPY out/bnn-server out/bnn-train out/bnnctl /usr/local/bin/' "${context}/Dockerfile" \
    || fail "the Dockerfile's runtime stage no longer copies /out/bnn-server /out/bnn-train /out/bnnctl"
  "${PODMAN}" build "${PODMAN_FLAGS[@]}" --format "${BUILD_FORMAT}" \
    --build-arg "REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
    -t "${IMAGE}" "${context}" >"${work}/prebuilt.log" 2>&1 \
    || { tail -n 40 "${work}/prebuilt.log" >&2; fail "podman build (prebuilt)"; }
  record "prebuilt: runtime stage with ${HOST_BUILD}'s binaries in $(seconds_since "${start}") s (the compile stage NOT exercised); image $("${PODMAN}" image inspect --format '{{.Size}}' "${IMAGE}") bytes"
}

step_image() {
  step "Image metadata"
  local user labels health volumes
  user="$("${PODMAN}" image inspect --format '{{.Config.User}}' "${IMAGE}")"
  [[ "${user}" == "bnn:bnn" ]] || fail "image user is '${user}', not bnn:bnn"
  labels="$("${PODMAN}" image inspect --format '{{json .Config.Labels}}' "${IMAGE}")"
  for key in title description version revision; do
    grep -q "\"org.opencontainers.image.${key}\"" <<<"${labels}" \
      || fail "label org.opencontainers.image.${key} missing: ${labels}"
  done
  health="$("${PODMAN}" image inspect --format '{{json .Config.Healthcheck}}' "${IMAGE}")"
  grep -q health <<<"${health}" || fail "no HEALTHCHECK: ${health}"
  volumes="$("${PODMAN}" image inspect --format '{{json .Config.Volumes}}' "${IMAGE}")"
  grep -q /var/lib/bnn <<<"${volumes}" || fail "no volume /var/lib/bnn: ${volumes}"
  if "${PODMAN}" run --rm "${PODMAN_FLAGS[@]}" --entrypoint sh "${IMAGE}" \
      -c 'command -v cc || command -v gcc || command -v c++ || command -v cmake'; then
    fail "the runtime image has a compiler or cmake"
  fi
  # One image for serving and for the Kubernetes Jobs' pods.
  # (podman's own warnings, e.g. about systemd health-check timers, go to
  # stderr, kept apart from the version line.)
  "${PODMAN}" run --rm "${PODMAN_FLAGS[@]}" --entrypoint bnn-train "${IMAGE}" \
    --version >"${work}/bnn-train-version" 2>"${work}/bnn-train-version.err" \
    || fail "bnn-train does not run in the image: $(cat "${work}/bnn-train-version" "${work}/bnn-train-version.err")"
  record "image: user bnn:bnn, OCI labels $(grep -o 'org.opencontainers.image.[a-z.]*' <<<"${labels}" | sed 's/org.opencontainers.image.//' | tr '\n' ' '), HEALTHCHECK ${health}, volume /var/lib/bnn, no compiler, bnn-train --version: $(head -n 1 "${work}/bnn-train-version")"
}

step_run() {
  step "Running ${IMAGE}"
  [[ -x "${BNNCTL}" ]] || fail "no host bnnctl at ${BNNCTL} (set BNNCTL)"
  # Safe by default: without a token file the server must refuse to start.
  if "${PODMAN}" run --name "${CONTAINER}-notoken" "${PODMAN_FLAGS[@]}" \
      "${IMAGE}" >"${work}/notoken.log" 2>&1; then
    fail "the image started without a token file"
  fi
  "${PODMAN}" rm -f "${CONTAINER}-notoken" >/dev/null
  grep -q "token file" "${work}/notoken.log" \
    || fail "no token-file message: $(cat "${work}/notoken.log")"
  record "run: without a token file the server refuses to start: $(grep -m1 'token file' "${work}/notoken.log" | sed 's/^.*\] //')"

  "${BNNCTL}" --json token create --scopes admin --name check >"${work}/token.json"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["line"])' \
    "${work}/token.json" >"${work}/tokens"
  chmod 0644 "${work}/tokens"
  export BNN_TOKEN
  BNN_TOKEN="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["token"])' "${work}/token.json")"
  "${PODMAN}" volume create "${VOLUME}" >/dev/null
  local start address="127.0.0.1:${GRPC_PORT}"
  start=$(date +%s)
  "${PODMAN}" run -d --name "${CONTAINER}" "${PODMAN_FLAGS[@]}" \
    -p "127.0.0.1:${GRPC_PORT}:50051" -p "127.0.0.1:${METRICS_PORT}:9464" \
    -v "${VOLUME}:/var/lib/bnn" \
    -v "${work}/tokens:/run/secrets/bnn-tokens:ro" "${IMAGE}" >/dev/null
  wait_healthy "${address}" 60 \
    || { "${PODMAN}" logs "${CONTAINER}" >&2; fail "no SERVING health within 60 s"; }
  record "run: SERVING on ${address} $(seconds_since "${start}") s after podman run"

  # The server process's uid, read on the host (the container's pid 1).
  local pid uid
  pid="$("${PODMAN}" inspect --format '{{.State.Pid}}' "${CONTAINER}")"
  uid="$(awk '/^Uid:/ {print $2}' "/proc/${pid}/status")"
  [[ "${uid}" == 10001 ]] || fail "bnn-server runs as uid ${uid}"
  record "run: bnn-server (host pid ${pid}) runs as uid ${uid} (bnn), not root"

  "${PODMAN}" healthcheck run "${CONTAINER}" || fail "HEALTHCHECK failed"
  record "run: HEALTHCHECK (bnnctl health in the container) passes: $("${PODMAN}" inspect --format '{{.State.Health.Status}}' "${CONTAINER}" 2>/dev/null || echo '?')"

  # The quickstart flow, with the host's bnnctl.
  python3 -c '
import random
random.seed(1)
print("x,y")
for _ in range(200):
    x = random.uniform(-3, 3)
    print(f"{x:.4f},{x * x / 3 + random.gauss(0, 0.1):.4f}")' >"${work}/data.csv"
  local ctl=("${BNNCTL}" --server "${address}")
  start=$(date +%s)
  "${ctl[@]}" --json upload --name check --task regression \
    --csv "${work}/data.csv" --target y >"${work}/upload.json"
  local dataset
  dataset="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dataset_id"])' "${work}/upload.json")"
  "${ctl[@]}" train --dataset "${dataset}" --method slang --hidden 10 \
    --epochs 200 --seed 1 --param rank=1 --model check --publish --wait \
    >"${work}/train.log"
  "${ctl[@]}" predict --model check --csv "${work}/data.csv" --target y \
    --samples 20 >"${work}/predict.out"
  [[ $(wc -l <"${work}/predict.out") -gt 100 ]] || fail "predict printed too little"
  curl -sf "http://127.0.0.1:${METRICS_PORT}/metrics" >"${work}/metrics.txt"
  grep -q '^bnn_rpc_requests_total{.*rpc="Predict"' "${work}/metrics.txt" \
    || fail "no Predict in /metrics"
  record "run: quickstart flow (upload 200 rows, train slang 200 epochs, publish, predict, /metrics) in $(seconds_since "${start}") s"
  # Without the token the server refuses a bnn.v1 call.
  if BNN_TOKEN='' "${ctl[@]}" datasets >/dev/null 2>&1; then
    fail "a call without a token succeeded"
  fi
  record "run: a call without a token is refused"
}

step_restart() {
  step "Restarting ${CONTAINER}: the volume keeps the data"
  local address="127.0.0.1:${GRPC_PORT}"
  "${PODMAN}" restart "${CONTAINER}" >/dev/null
  wait_healthy "${address}" 60 || fail "not SERVING after restart"
  "${BNNCTL}" --server "${address}" --json datasets | grep -q '"name":"check"' \
    || fail "the dataset is gone after the restart"
  "${BNNCTL}" --server "${address}" predict --model check \
    --csv "${work}/data.csv" --target y --samples 20 >"${work}/predict2.out" \
    || fail "the model is gone after the restart"
  record "restart: after podman restart the dataset and the published model are there, Predict answers"
  "${PODMAN}" rm -f "${CONTAINER}" >/dev/null
}

step_compose() {
  step "podman-compose: bnn-server, PostgreSQL and Prometheus of deploy/compose"
  command -v podman-compose >/dev/null || fail "podman-compose is not installed"
  "${BNNCTL}" --json token create --scopes admin --name compose \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["line"])' \
    >deploy/compose/tokens
  chmod 0644 deploy/compose/tokens
  echo "PGPASSWORD=$(openssl rand -hex 16)" >deploy/compose/postgres.env
  touch "${work}/compose-up"
  local start
  start=$(date +%s)
  # The locally built image serves as compose's bnn-server image.
  "${PODMAN}" tag "${IMAGE}" localhost/bnn-serve:latest
  (cd deploy/compose && CONTAINERS_CONF="${work}/containers.conf" \
    podman-compose -p "${COMPOSE_PROJECT}" \
      --podman-build-args "${PODMAN_FLAGS[*]} --format ${BUILD_FORMAT}" \
      up -d postgres bnn-server prometheus) >"${work}/compose.log" 2>&1 \
    || { tail -n 40 "${work}/compose.log" >&2; fail "podman-compose up"; }
  # Prometheus reaches the server by its service name (compose DNS).
  "${PODMAN}" exec "${COMPOSE_PROJECT}_prometheus_1" \
    getent hosts bnn-server >/dev/null 2>&1 \
    || echo "warning: 'bnn-server' does not resolve in the Prometheus container (CNI backend without the dnsname plugin?)" >&2
  local answer=""
  for _ in $(seq 120); do
    answer="$(curl -sf 'http://127.0.0.1:9090/api/v1/query' \
      --data-urlencode 'query=bnn_build_info * on(instance) group_left up{job="bnn-server"}' || true)"
    grep -q '"value":\[[0-9.]*,"1"\]' <<<"${answer}" && break
    answer=""
    sleep 1
  done
  [[ -n "${answer}" ]] || fail "Prometheus did not answer bnn_build_info of the scraped server in 120 s"
  # The alert rules are loaded, and with the server up none fires.
  local rules
  rules="$(curl -sf 'http://127.0.0.1:9090/api/v1/rules?type=alert')"
  python3 -c '
import json, sys
rules = [r for g in json.loads(sys.argv[1])["data"]["groups"] for r in g["rules"]]
firing = [r["name"] for r in rules if r["state"] == "firing"]
print(len(rules), "alert rules loaded, firing:", firing or "none")
sys.exit(1 if len(rules) < 5 or firing else 0)' "${rules}" >"${work}/rules.txt" \
    || fail "alert rules: $(cat "${work}/rules.txt")"
  record "compose: podman-compose up (bnn-server on PostgreSQL, PostgreSQL and Prometheus from Debian's packages) in $(seconds_since "${start}") s; PromQL 'bnn_build_info * on(instance) group_left up{job=\"bnn-server\"}' answered: ${answer}; $(cat "${work}/rules.txt")"
}

steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(base build image run restart compose)
echo "# container-check $(date -u +%Y-%m-%dT%H:%MZ), podman $("${PODMAN}" --version | awk '{print $3}'), runtime ${PODMAN_RUNTIME}, ulimits ${PODMAN_ULIMITS}" >"${summary}"
for s in "${steps[@]}"; do
  case "${s}" in
    base|build|prebuilt|image|run|restart|compose) "step_${s}" ;;
    *) echo "unknown step ${s} (base build prebuilt image run restart compose)" >&2; exit 2 ;;
  esac
done
step "Summary"
cat "${summary}"
