# The sandbox image: each eval case runs the real Claude Code CLI in a container
# of this image, as the unprivileged user `agent` (uid 1000).
#
# Built by agent_eval_sandbox.sandbox.image with the classic builder, which
# assembles the context: this file, sandbox-setup.sh, the `claude` native binary
# (from the npm registry, integrity-checked) and the `inside/` scripts. The tag
# is a hash of all of them plus the base image's ID.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

ARG CLAUDE_VERSION=unknown
# 1: the CLI and the hook interpreter are execute-only (non-dumpable processes);
# 0 for runtimes that must read a binary to run it (gVisor).
ARG EXEC_ONLY=1
LABEL agent-eval-sandbox.image="sandbox" \
      agent-eval-sandbox.claude-version="${CLAUDE_VERSION}"

COPY sandbox-setup.sh /tmp/sandbox-setup.sh
RUN EXEC_ONLY="${EXEC_ONLY}" sh /tmp/sandbox-setup.sh && rm /tmp/sandbox-setup.sh

# Root-owned and not writable by the agent (modes are set in the build context).
COPY claude /usr/local/bin/claude
COPY inside/ /opt/agent-eval/
# Compiled once here: the launcher and a hook client at every tool call start on the case's CPU,
# and the sandbox user cannot write a cache of its own.
RUN python3 -m compileall -q /opt/agent-eval

ENV DISABLE_AUTOUPDATER=1 \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
    DISABLE_TELEMETRY=1 \
    DISABLE_ERROR_REPORTING=1 \
    CLAUDE_CODE_MAX_RETRIES=2 \
    PYTHONDONTWRITEBYTECODE=1 \
    LANG=C.UTF-8 \
    HOME=/home/agent

WORKDIR /workspace
USER 1000:1000
CMD ["sleep", "infinity"]
