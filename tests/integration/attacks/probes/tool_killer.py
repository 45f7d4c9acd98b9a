"""In-sandbox probe, left running by the agent: kill (or stop) the tool's own commands as they start.

argv[1] is JSON: {"seconds": how long, "signal": "KILL" or "STOP" (default KILL)}. It polls /proc
and sends that signal to every new process of
its own user run by the execute-only interpreter that is not an agent's launcher: a step's
killer and listing, a hook's filter installer. Non-dumpable stops ptrace, not a signal from the
same user (the twelfth round's third helper). It writes nothing and holds none of the descriptors
it was started with, so that the Bash call that started it returns.
"""

import json
import os
import signal
import sys
import time

ARGS = json.loads(sys.argv[1])
SIGNAL = getattr(signal, "SIG" + ARGS.get("signal", "KILL"))
os.closerange(3, 4096)
me, uid = os.getpid(), os.getuid()
deadline = time.monotonic() + ARGS["seconds"]
done = set()
while time.monotonic() < deadline:
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me or entry in done:
            continue
        try:
            status = open(f"/proc/{entry}/status").read()
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if int(fields.get("Uid", "-1").split()[0]) != uid or not fields.get("Name", "").startswith("python3-agent"):
            continue
        if b"run_agent.py" in cmdline or not cmdline:
            continue
        done.add(entry)
        try:
            os.kill(int(entry), SIGNAL)
        except OSError:
            pass
    time.sleep(0.0003)
