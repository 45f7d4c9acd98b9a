#!/usr/bin/env bash
# Run an eval in CI: the one script every recipe in examples/ci/ calls (the tests run it too).
#
#   examples/ci/run-eval.sh EVAL_YAML [run options, e.g. --offline]
#
# Environment:
#   AES_CONTROLLER_IMAGE  run agent-eval-sandbox from this controller image (the container form)
#                         instead of the `agent-eval-sandbox` on PATH
#   AES_IMAGE_CACHE       a `docker image save` tarball of the sandbox image and its base: loaded
#                         first if present, written when it does not hold the current image
#   AES_CACHE_DIR         the tool's cache (Claude Code's release record and binary), to keep between
#                         runs; default: ~/.cache/agent-eval-sandbox, or in the container form the
#                         named volume agent-eval-sandbox-cache
#   AGENT_EVAL_RUNS_DIR   where runs go (default eval/runs); AES_RUN_ID: the run's name (default ci-<time>)
#
# Exit code: the run's (0 every threshold met, 1 a regression, 2 bad input): the CI gate.
# The run directory, with junit.xml and report.html, is $AGENT_EVAL_RUNS_DIR/<eval name>/$AES_RUN_ID.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 EVAL_YAML [run options]" >&2
  exit 2
fi
eval_yaml=$1
shift
runs_dir=${AGENT_EVAL_RUNS_DIR:-eval/runs}
run_id=${AES_RUN_ID:-ci-$(date -u +%Y%m%d-%H%M%S)}
socket=/var/run/docker.sock

if [ -n "${AES_CACHE_DIR:-}" ]; then
  mkdir -p "$AES_CACHE_DIR"  # ours, not a root-owned directory the daemon would make for the mount
  AES_CACHE_DIR=$(cd "$AES_CACHE_DIR" && pwd)
fi

aes() {
  if [ -z "${AES_CONTROLLER_IMAGE:-}" ]; then
    AGENT_EVAL_CACHE_DIR=${AES_CACHE_DIR:-${AGENT_EVAL_CACHE_DIR:-}} agent-eval-sandbox "$@"
    return
  fi
  # The working directory is mounted at the same path: the runs directory under it is where the
  # sandboxes' sockets and files go, and the host's daemon must see them there.
  docker run --rm --init \
    --user "$(id -u):$(id -g)" --group-add "$(stat -c %g "$socket")" \
    -v "$socket:/var/run/docker.sock" \
    -v "$PWD:$PWD" -w "$PWD" \
    -v "${AES_CACHE_DIR:-agent-eval-sandbox-cache}:/cache" \
    -e ANTHROPIC_API_KEY -e ANTHROPIC_AUTH_TOKEN -e ANTHROPIC_BASE_URL \
    "$AES_CONTROLLER_IMAGE" "$@"
}

cache=${AES_IMAGE_CACHE:-}
if [ -n "$cache" ] && [ -f "$cache" ]; then
  docker image load -q -i "$cache"
fi
ref=$(aes image build --quiet)
if [ -n "$cache" ] && ! { [ -f "$cache" ] && tar -xOf "$cache" manifest.json | grep -qF "\"$ref\""; }; then
  base=$(docker image inspect --format '{{index .Config.Labels "agent-eval-sandbox.base"}}' "$ref")
  mkdir -p "$(dirname "$cache")"
  docker image save -o "$cache.tmp" "$ref" ${base:+"$base"}
  mv "$cache.tmp" "$cache"
  echo "saved $ref${base:+ and $base} to $cache" >&2
fi

aes run "$eval_yaml" --runs-dir "$runs_dir" --run-id "$run_id" "$@"
