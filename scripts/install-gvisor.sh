#!/usr/bin/env bash
# Install gVisor (Debian's runsc) and register it with Docker as the runtime
# `runsc-nonet`, idempotently; eval.yaml selects it with `sandbox: {runtime: runsc-nonet}`.
#
# The runtime carries runsc's own flags:
#   --network=none   plain `--runtime=runsc` fails with Debian's 2022 build
#                    ("cannot run with network enabled in root network namespace");
#   --host-uds=open  the sandbox must connect to the model gateway's bind-mounted
#                    unix socket, which gVisor refuses by default.
# Needs root and a running dockerd (scripts/setup.sh starts one). Safe to run
# again: each step is skipped when done.
set -euo pipefail

RUNTIME=runsc-nonet
RUNTIME_ARGS=(--network=none --host-uds=open)
DAEMON_JSON=/etc/docker/daemon.json

log() { printf '[install-gvisor] %s\n' "$*" >&2; }

if [ "$(id -u)" != 0 ]; then
  log "run this as root (it installs a package and edits $DAEMON_JSON)"
  exit 1
fi
if ! docker info >/dev/null 2>&1; then
  log "Docker is not running: start it first (scripts/setup.sh does)"
  exit 1
fi

if ! command -v runsc >/dev/null 2>&1; then
  log "installing runsc (Debian's gVisor)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q runsc >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q runsc >/dev/null; }
fi

# Whether daemon.json registers the runtime as runsc with exactly our flags.
configured() {
  python3 - "$DAEMON_JSON" "$RUNTIME" "$(command -v runsc)" "${RUNTIME_ARGS[@]}" <<'PY'
import json, os, sys
path, name, binary, *args = sys.argv[1:]
try:
    runtime = json.load(open(path)).get("runtimes", {}).get(name, {})
except (OSError, ValueError):
    sys.exit(1)
same_binary = os.path.realpath(runtime.get("path", "")) == os.path.realpath(binary)
sys.exit(0 if same_binary and runtime.get("runtimeArgs") == args else 1)
PY
}

registered() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | python3 -c \
    "import json, sys; sys.exit(0 if '$RUNTIME' in json.load(sys.stdin) else 1)"
}

if configured && registered; then
  log "runtime $RUNTIME is registered ($(runsc --version 2>/dev/null | head -1))"
  exit 0
fi

if ! configured; then
  log "registering runtime $RUNTIME in $DAEMON_JSON: runsc ${RUNTIME_ARGS[*]}"
  runsc install --runtime="$RUNTIME" -- "${RUNTIME_ARGS[@]}"
fi

# dockerd re-reads its runtimes on SIGHUP; under systemd, a reload does the same.
if pid=$(pidof dockerd); then
  kill -HUP $pid
elif command -v systemctl >/dev/null 2>&1; then
  systemctl reload docker
else
  log "cannot find dockerd to reload it: restart Docker yourself"
  exit 1
fi
for _ in $(seq 1 30); do
  if registered; then
    log "runtime $RUNTIME is registered"
    exit 0
  fi
  sleep 1
done
log "dockerd does not list $RUNTIME after a reload; see its log"
exit 1
