#!/usr/bin/env bash
# Install crun (Debian's) and register it with Docker as the runtime `crun`,
# idempotently; eval.yaml selects it with `sandbox: {runtime: crun}`.
#
# crun is an OCI runtime in C: the sandbox runs on the host's kernel as under
# runc, with the same hardening, and each container's create, exec and removal
# cost less CPU than runc's (docs/performance.md). crun 1.8 refuses a hybrid
# cgroup layout (v1 hierarchies beside a v2 one) while any controller is bound
# to the v2 one ("cgroups in hybrid mode not supported"); such a controller that
# no cgroup uses there is moved to a v1 hierarchy of its own. That mount does not
# survive a reboot: run this again after one.
# Needs root and a running dockerd (scripts/setup.sh starts one). Safe to run
# again: each step is skipped when done.
set -euo pipefail

RUNTIME=crun
DAEMON_JSON=/etc/docker/daemon.json
UNIFIED=/sys/fs/cgroup/unified

log() { printf '[install-crun] %s\n' "$*" >&2; }
# shellcheck source=scripts/docker-runtime.sh
. "$(dirname "$0")/docker-runtime.sh"

require_root_and_docker "installs a package, may mount a cgroup hierarchy and edits $DAEMON_JSON"
apt_install crun "Debian's" crun
BINARY=$(command -v crun)

# Hybrid layout: a tmpfs of v1 hierarchies with the v2 one mounted at unified/.
if [ "$(stat -fc %T /sys/fs/cgroup)" = tmpfs ] && [ "$(stat -fc %T "$UNIFIED" 2>/dev/null)" = cgroup2fs ]; then
  for controller in $(cat "$UNIFIED/cgroup.controllers"); do
    log "moving the cgroup controller $controller from the v2 hierarchy to a v1 one (crun refuses it on v2 in a hybrid layout)"
    mkdir -p "/sys/fs/cgroup/$controller"
    if ! mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller"; then
      log "could not mount $controller as a v1 hierarchy: a cgroup on the v2 one uses it; boot with cgroup v2 alone, or stop what uses it"
      exit 1
    fi
  done
fi

if ! runtime_configured "$RUNTIME" "$BINARY" || ! runtime_registered "$RUNTIME"; then
  if ! runtime_configured "$RUNTIME" "$BINARY"; then
    log "registering runtime $RUNTIME in $DAEMON_JSON: $BINARY"
    python3 - "$DAEMON_JSON" "$RUNTIME" "$BINARY" <<'PY'
import json, os, sys
path, name, binary = sys.argv[1:]
config = {}
if os.path.exists(path):
    with open(path) as f:
        config = json.load(f)  # a daemon.json that is not JSON stops here, untouched
config.setdefault("runtimes", {})[name] = {"path": binary}
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path + ".tmp", "w") as f:
    json.dump(config, f, indent=4)
os.replace(path + ".tmp", path)
PY
  fi
  reload_until_registered "$RUNTIME"
fi

# A container's start is what fails on a cgroup layout crun cannot use: start one.
image=$(docker images --format '{{.Repository}}:{{.Tag}}' agent-eval-sandbox | head -1)
if [ -n "$image" ]; then
  if ! out=$(docker run --rm --runtime "$RUNTIME" --network none "$image" true 2>&1); then
    log "a container under $RUNTIME did not start: $out"
    exit 1
  fi
fi
log "runtime $RUNTIME is registered ($(crun --version | head -1))"
