#!/bin/sh
# Build-time setup of the sandbox image, as root, on any Debian-based base.
# Installs only what the base lacks, so an offline base made by
# `agent-eval-sandbox image bootstrap-base` (which already has all of it)
# builds without network.
set -eu

missing=""
for pkg in python3 git procps ca-certificates; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $pkg"
    fi
done
if [ -n "$missing" ]; then
    apt-get update
    # shellcheck disable=SC2086  # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
fi

# The agent user is uid/gid 1000. Node images already have `node` there: rename it.
group=$(getent group 1000 | cut -d: -f1)
if [ -z "$group" ]; then
    groupadd -g 1000 agent
elif [ "$group" != agent ]; then
    groupmod -n agent "$group"
fi
user=$(getent passwd 1000 | cut -d: -f1)
if [ -z "$user" ]; then
    useradd -u 1000 -g 1000 -m -d /home/agent -s /bin/bash agent
elif [ "$user" != agent ]; then
    usermod -l agent -g 1000 -d /home/agent -m -s /bin/bash "$user"
fi

# The interpreter of the hook client, the launcher and the tool's own commands in
# the sandbox: with EXEC_ONLY=1 an execute-only copy of python3, so each of their
# processes is non-dumpable from its first instruction (the agent, same uid,
# cannot ptrace it or rewrite its answer). 0111, not 0711: root inside
# (sandbox.user "0:0") owns the file but has no CAP_DAC_OVERRIDE, so it cannot
# read it either. In /usr/bin it still finds its stdlib.
if [ "${EXEC_ONLY:-1}" = 1 ]; then mode=0111; else mode=0755; fi
install -o root -g root -m "$mode" "$(readlink -f /usr/bin/python3)" /usr/bin/python3-agent-eval

mkdir -p /home/agent /workspace
chown 1000:1000 /home/agent /workspace
