#!/usr/bin/env bash
# Set up everything agent-eval-sandbox needs on this machine, idempotently:
#   1. a running Docker daemon (on Debian/Ubuntu as root: installs docker.io and
#      starts dockerd when `docker info` fails),
#   2. a virtualenv at .venv with the project and its test extras,
#   3. the sandbox image (and, with no registry reachable, a local base image
#      made with debootstrap).
# With --test, also what the test suite needs beyond that: gVisor registered as
# the runtime `runsc-nonet` and crun as `crun` (the attack suite runs under each
# of runc, crun and gVisor), Debian's chromium (the HTML report test) and Debian's podman (the Kubernetes backend's
# Pods run under `podman kube play`). Safe to run again: each step is skipped when done.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[setup] %s\n' "$*" >&2; }

ensure_docker() {
  if docker info >/dev/null 2>&1; then
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    log "Docker is not running and this is not root: start Docker yourself, then rerun."
    exit 1
  fi
  if ! command -v dockerd >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
      log "no dockerd and no apt-get: install Docker Engine, then rerun."
      exit 1
    fi
    log "installing docker.io (Debian's Docker Engine)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null \
      || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >/dev/null; }
  fi
  log "starting dockerd in the background (log: /var/log/agent-eval-dockerd.log)"
  nohup dockerd >/var/log/agent-eval-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then
      return
    fi
    sleep 1
  done
  log "dockerd did not come up within 60 s; see /var/log/agent-eval-dockerd.log"
  exit 1
}

ensure_venv() {
  if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    python3 -m venv .venv
  fi
  if ! .venv/bin/python -c 'import agent_eval_sandbox, pytest, mypy' >/dev/null 2>&1 \
     || [ ! -x .venv/bin/ruff ] || [ pyproject.toml -nt .venv/.installed ]; then
    log "installing agent-eval-sandbox with test extras (pytest, ruff, mypy) into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'
    touch .venv/.installed
  fi
}

ensure_images() {
  # With no registry reachable, the base image is made locally with debootstrap.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
  fi
  # Builds only what is missing (images are tagged by a hash of their inputs).
  .venv/bin/agent-eval-sandbox image build --bootstrap-missing-base
}

ensure_test_tools() {
  # The attack suite runs under crun and gVisor too.
  ./scripts/install-gvisor.sh
  ./scripts/install-crun.sh
  if command -v chromium >/dev/null 2>&1; then
    return
  fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "chromium is missing (the HTML report test needs it): install it, then rerun."
    exit 1
  fi
  log "installing chromium (for the HTML report test)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }
}

ensure_podman() {
  # `podman kube play` runs the Pods the Kubernetes backend generates (no cluster can run here);
  # catatonit is the pause binary of its Pods.
  if command -v podman >/dev/null 2>&1 && command -v catatonit >/dev/null 2>&1; then
    return
  fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "podman is missing (the Kubernetes backend's Pod tests need it): install podman and catatonit, then rerun."
    exit 1
  fi
  log "installing podman (for the Kubernetes backend's Pod tests)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman catatonit >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q podman catatonit >/dev/null; }
}

with_tests=0
for arg in "$@"; do
  case "$arg" in
    --test) with_tests=1 ;;
    *) log "unknown argument: $arg (the only option is --test)"; exit 2 ;;
  esac
done

ensure_docker
ensure_venv
ensure_images
if [ "$with_tests" = 1 ]; then
  ensure_test_tools
  ensure_podman
fi
log "ready"
