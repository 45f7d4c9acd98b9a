"""Small python3 programs the backends run inside a sandbox to control its processes (pure strings).

They run through the backend's exec as the sandbox user, so they can reach
exactly the processes an agent could: the agent's own.
"""

from __future__ import annotations

# Set on "kill_exec" commands so that their processes (and children that
# inherit the environment) can be found and killed inside the sandbox: the
# exec's pid on the host is not visible to a controller running elsewhere.
EXEC_MARKER = "AGENT_EVAL_EXEC"
KILLER = (
    "import os,sys\n"
    "mark=sys.argv[1].encode()\n"
    "for _ in range(20):\n"
    "  hit=0\n"
    "  for p in os.listdir('/proc'):\n"
    "    if not p.isdigit(): continue\n"
    "    try:\n"
    "      if mark not in open('/proc/'+p+'/environ','rb').read().split(b'\\0'): continue\n"
    "      hit=1\n"
    "      try: os.killpg(int(p),9)\n"
    "      except OSError: pass\n"
    "      os.kill(int(p),9)\n"
    "    except OSError: pass\n"
    "  if not hit: break\n"
)
# kill(-1, sig) reaches every process the caller may signal but pid 1 and itself, in one
# pass under the kernel's task list lock: a fork bomb cannot outrun it. In a Pod's
# container (its own pid namespace) that is every process of the agent.
STOP_ALL = "import os,signal\nos.kill(-1,signal.SIGSTOP)\n"
KILL_ALL = (
    "import os,signal\n"
    "for _ in range(50):\n"
    "  try: os.kill(-1,signal.SIGKILL)\n"
    "  except ProcessLookupError: raise SystemExit(0)\n"
    "raise SystemExit(1)\n"
)
