# The controller image: agent-eval-sandbox itself, to run evals from a container
# (CI jobs, Kubernetes) against the host's Docker daemon:
#
#   docker run --rm --init --user "$(id -u):$(id -g)" \
#     --group-add "$(stat -c %g /var/run/docker.sock)" \
#     -v /var/run/docker.sock:/var/run/docker.sock -v "$PWD:$PWD" -w "$PWD" \
#     agent-eval-sandbox-controller run eval.yaml
#
# It holds nothing of the sandbox image: the controller builds that one through
# the daemon, from the build context inside the installed package.
#
# Build: `agent-eval-sandbox image build --controller` (from a checkout; the Python
# packages are fetched on the host with its pip settings, so the build itself needs
# no registry), or `docker build -t agent-eval-sandbox-controller .` where build
# containers reach PyPI and a registry. BASE_IMAGE must be Debian bookworm based
# (Python 3.11): the default is the base `agent-eval-sandbox image bootstrap-base`
# makes; `debian:bookworm-slim` or `python:3.11-slim` elsewhere.
ARG BASE_IMAGE=agent-eval-sandbox-base:bookworm

# ---- build: the project's wheel and its dependencies, installed into a venv ----------
FROM ${BASE_IMAGE} AS build
# Python and pip from Debian's packages unless the base has them (python:3.11-slim does).
RUN if ! python3 -c 'import ensurepip, venv' 2>/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then \
      apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        python3 python3-venv python3-pip ca-certificates && rm -rf /var/lib/apt/lists/*; \
    fi
COPY . /src
# A wheelhouse/ in the context (`image build --controller` makes one) is the only package source;
# without one, pip asks PyPI.
RUN set -eu; \
    if [ -d /src/wheelhouse ]; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/src/wheelhouse; fi; \
    python3 -m venv /opt/agent-eval-sandbox; \
    pip=/opt/agent-eval-sandbox/bin/pip; \
    $pip wheel -q --disable-pip-version-check --no-deps --wheel-dir /wheels /src; \
    $pip install -q --disable-pip-version-check /wheels/*.whl; \
    $pip uninstall -q -y --disable-pip-version-check pip setuptools wheel; \
    /opt/agent-eval-sandbox/bin/python -I -c 'import agent_eval_sandbox.cli'

# ---- the image: Python, git (repo-mode snapshots), the venv; no compiler, no pip -----
FROM ${BASE_IMAGE}
RUN missing=""; command -v python3 >/dev/null || missing="python3"; command -v git >/dev/null || missing="$missing git"; \
    if [ -n "$missing" ]; then \
      apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        $missing ca-certificates && rm -rf /var/lib/apt/lists/*; \
    fi; \
    mkdir -p /cache && chmod 1777 /cache; \
    useradd --uid 10001 --user-group --create-home --home-dir /home/aes aes
COPY --from=build /opt/agent-eval-sandbox /opt/agent-eval-sandbox
LABEL agent-eval-sandbox.image="controller"
# The cache (Claude Code's release record, image locks) is /cache for any --user: mount a volume
# there to keep it between runs. PYTHONDONTWRITEBYTECODE: the venv is read-only to --user uids.
ENV PATH=/opt/agent-eval-sandbox/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    AGENT_EVAL_CACHE_DIR=/cache \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LANG=C.UTF-8
# Non-root. The daemon's socket is usually root:docker 0660: add its group
# (`--group-add "$(stat -c %g /var/run/docker.sock)"`), or run as root only where
# the socket admits no group (e.g. 0600 root:root).
USER 10001:10001
WORKDIR /home/aes
ENTRYPOINT ["agent-eval-sandbox"]
CMD ["--help"]
