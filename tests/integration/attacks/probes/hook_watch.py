"""In-sandbox probe, left running by the agent: attach to the container hooks before their filter is on.

argv[1] is JSON: {"log": path, "seconds": how long to watch}. It polls /proc; every process of its
own user with fewer seccomp filters than itself (one that has not yet stacked the sandbox's) gets a
PTRACE_SEIZE, which, if it worked, would let it run any call in that process. Each one met is
logged as an `@@{json}` line: its pid, name, filters and whether the attach worked (then it
detaches at once, having done nothing).
"""

import ctypes
import errno
import json
import os
import sys
import time

ARGS = json.loads(sys.argv[1])
PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT, WALL = 17, 0x4206, 0x4207, 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


def status(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    except (OSError, ValueError):
        return None
    return {"name": fields.get("Name", ""), "uid": int(fields.get("Uid", "-1").split()[0]),
            "filters": int(fields.get("Seccomp_filters", "-1"))}


me = status(os.getpid())
uid, mine = os.getuid(), me["filters"]
deadline = time.monotonic() + ARGS["seconds"]
tried = set()
with open(ARGS["log"], "a", buffering=1) as log:
    log.write("@@" + json.dumps({"probe": "watch", "filters": mine}) + "\n")
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            pid = int(entry)
            seen = status(pid)
            if seen is None or seen["uid"] != uid or not 0 <= seen["filters"] < mine:
                continue
            key = (pid, seen["name"], seen["filters"])
            if key in tried:
                continue
            tried.add(key)
            attached = libc.ptrace(PTRACE_SEIZE, pid, None, None) == 0
            code = "" if attached else errno.errorcode.get(ctypes.get_errno(), "?")
            if attached:  # stop it, then let it go: a seized process would stop at its next signal
                libc.ptrace(PTRACE_INTERRUPT, pid, None, None)
                try:
                    os.waitpid(pid, WALL)
                except ChildProcessError:
                    pass
                libc.ptrace(PTRACE_DETACH, pid, None, None)
            log.write("@@" + json.dumps({"probe": "met", "pid": pid, "name": seen["name"],
                                         "filters": seen["filters"], "attached": attached, "error": code}) + "\n")
        time.sleep(0.0003)
