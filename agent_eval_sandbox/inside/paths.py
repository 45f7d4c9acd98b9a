"""Where things are inside a sandbox: one list for the host side and the in-container scripts.

Standard library only, no imports: the scripts next to this file run in the
sandbox image (`import paths`), and the host imports it as
`agent_eval_sandbox.inside.paths`.
"""

WORKSPACE = "/workspace"
HOME = "/home/agent"

# The per-case directory the host mounts (read-only): the model gateway's and
# the hook broker's sockets, and the prompt.
RUN_DIR = "/run/agent-eval"
GATEWAY_SOCKET_NAME = "gateway.sock"
BROKER_SOCKET_NAME = "broker.sock"
PROMPT_FILE_NAME = "prompt.txt"
GATEWAY_SOCKET = f"{RUN_DIR}/{GATEWAY_SOCKET_NAME}"
BROKER_SOCKET = f"{RUN_DIR}/{BROKER_SOCKET_NAME}"
PROMPT_FILE = f"{RUN_DIR}/{PROMPT_FILE_NAME}"

# Claude Code's managed settings: the tool-interception gate, mounted read-only.
MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json"

# The in-container scripts (root-owned, read-only) and their interpreter.
SCRIPTS_DIR = "/opt/agent-eval"
LAUNCHER = f"{SCRIPTS_DIR}/run_agent.py"
HOOK_CLIENT = f"{SCRIPTS_DIR}/hook_client.py"
# Runs a command under the seccomp filter the launcher puts on the agent (confine.py).
CONFINE = f"{SCRIPTS_DIR}/confine.py"
# Execute-only on the host's kernel (runc, crun): each process of it is non-dumpable from its first instruction.
PROTECTED_PYTHON = "/usr/bin/python3-agent-eval"
# How every script of ours starts under it: -I, nothing of the environment (PYTHON*, the script's directory on
# sys.path) chooses what runs; -S, the standard library alone, without `site`'s start-up.
PROTECTED_INTERPRETER = (PROTECTED_PYTHON, "-I", "-S")

# The CLI reaches the gateway through the launcher's TCP forwarder on loopback.
FORWARDER_PORT = 8080
