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
# shellcheck source=scripts/docker-runtime.sh
. "$(dirname "$0")/docker-runtime.sh"

require_root_and_docker "installs a package and edits $DAEMON_JSON"
apt_install runsc "Debian's gVisor" runsc

if runtime_configured "$RUNTIME" "$(command -v runsc)" "${RUNTIME_ARGS[@]}" && runtime_registered "$RUNTIME"; then
  log "runtime $RUNTIME is registered ($(runsc --version 2>/dev/null | head -1))"
  exit 0
fi

if ! runtime_configured "$RUNTIME" "$(command -v runsc)" "${RUNTIME_ARGS[@]}"; then
  log "registering runtime $RUNTIME in $DAEMON_JSON: runsc ${RUNTIME_ARGS[*]}"
  runsc install --runtime="$RUNTIME" -- "${RUNTIME_ARGS[@]}"
fi
reload_until_registered "$RUNTIME"
log "runtime $RUNTIME is registered"
