# Shared by the scripts that register a container runtime with Docker (install-gvisor.sh,
# install-crun.sh); sourced, not run. The sourcing script defines `log` and sets DAEMON_JSON.

# Stop unless this is root and Docker is running; $1 says what the script changes as root.
require_root_and_docker() {
  if [ "$(id -u)" != 0 ]; then
    log "run this as root (it $1)"
    exit 1
  fi
  if ! docker info >/dev/null 2>&1; then
    log "Docker is not running: start it first (scripts/setup.sh does)"
    exit 1
  fi
}

# Install Debian's package $1 (described as $2) unless the command $3 is there.
apt_install() {
  if command -v "$3" >/dev/null 2>&1; then
    return
  fi
  log "installing $1 ($2)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$1" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$1" >/dev/null; }
}

# Whether daemon.json registers the runtime $1 as the binary $2 with exactly the flags $3...
runtime_configured() {
  python3 - "$DAEMON_JSON" "$@" <<'PY'
import json, os, sys
path, name, binary, *args = sys.argv[1:]
try:
    runtime = json.load(open(path)).get("runtimes", {}).get(name, {})
except (OSError, ValueError):
    sys.exit(1)
same_binary = os.path.realpath(runtime.get("path", "")) == os.path.realpath(binary)
sys.exit(0 if same_binary and (runtime.get("runtimeArgs") or []) == args else 1)
PY
}

# Whether the running dockerd lists the runtime $1.
runtime_registered() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | python3 -c \
    "import json, sys; sys.exit(0 if sys.argv[1] in json.load(sys.stdin) else 1)" "$1"
}

# Make dockerd re-read daemon.json, and wait until it lists the runtime $1.
reload_until_registered() {
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
    if runtime_registered "$1"; then
      return
    fi
    sleep 1
  done
  log "dockerd does not list $1 after a reload; see its log"
  exit 1
}
