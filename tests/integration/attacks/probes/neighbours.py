"""Look for the other cases of the run from inside one sandbox (sandboxes made ahead by the pool).

Argument (JSON): {"me": case id, "mark": the marker prefix, split so that this
file never holds it whole; "phase": "first" | "second"}.

Prints `@@{json}` records:
- "identity": this sandbox's hostname (its container) and what a case before
  it would have left here (files under /workspace, $HOME, /tmp written by a
  case other than this one);
- "found": every file under a mount (not the image's read-only root, not
  /proc, /sys, /dev) that holds a marker, with which case's it is;
- "sockets": every unix socket there;
- "run_dir": what the case's channel directory holds, and whose prompt it is;
- "mounts": the host directories behind this sandbox's bind mounts (mountinfo).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys

ARGS = json.loads(sys.argv[1])
ME = ARGS["me"]
MARK = "".join(ARGS["mark"]).encode()
SKIP = ("/proc", "/sys", "/dev")


def emit(probe: str, **data: object) -> None:
    print("@@" + json.dumps({"probe": probe, **data}), flush=True)


def walk(root: str):
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
        if dirpath == "/":
            dirnames[:] = [d for d in dirnames if "/" + d not in SKIP]
        for name in filenames:
            yield os.path.join(dirpath, name)


def leftovers() -> list[str]:
    """Files a case before this one would have left in this sandbox's writable places."""
    found = []
    for root in ("/workspace", os.environ.get("HOME", "/home/agent"), "/tmp"):
        for path in walk(root):
            if os.path.basename(path).startswith("left-by-") and os.path.basename(path) != f"left-by-{ME}":
                found.append(path)
    return found


emit("identity", hostname=socket.gethostname(), leftovers=leftovers())
for root in ("/workspace", os.environ.get("HOME", "/home/agent"), "/tmp"):
    with open(os.path.join(root, f"left-by-{ME}"), "w") as f:
        f.write(ME)


def mount_targets() -> list[str]:
    """Every mount but the image's root (read-only, the same for every case) and the kernel's."""
    targets = set()
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                target = line.split()[4]
                if target != "/" and not any(target == s or target.startswith(s + "/") for s in SKIP):
                    targets.add(target)
    except OSError:
        pass
    return sorted(targets | {"/workspace", "/home", "/tmp", "/run", "/etc/claude-code"})


def scanned() -> list[str]:
    seen: set[str] = set()
    paths = []
    for root in mount_targets():
        candidates = [root] if os.path.isfile(root) else walk(root)
        for path in candidates:
            if path not in seen:
                seen.add(path)
                paths.append(path)
    return paths


hits = []
sockets = []
for path in scanned():
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        continue
    if stat.S_ISSOCK(mode):
        sockets.append(path)
        continue
    if not stat.S_ISREG(mode):
        continue
    try:
        with open(path, "rb") as f:
            data = f.read(8 * 1024 * 1024)
    except OSError:
        continue
    start = 0
    while True:
        at = data.find(MARK, start)
        if at < 0:
            break
        owner = data[at + len(MARK): at + len(MARK) + 8].split(b"\n")[0].decode("ascii", "replace")
        hits.append({"path": path, "case": owner})
        start = at + 1
emit("found", hits=hits)
emit("sockets", paths=sorted(sockets))

run_dir = "/run/agent-eval"
try:
    listing = sorted(os.listdir(run_dir))
    with open(os.path.join(run_dir, "prompt.txt")) as f:
        prompt = f.read()
except OSError as exc:
    listing, prompt = [f"error: {exc}"], ""
emit("run_dir", listing=listing, prompt=prompt)

mounts = []
try:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mounts.append({"root": fields[3], "target": fields[4]})
except OSError:
    pass
emit("mounts", mounts=[m for m in mounts if m["target"] in (run_dir, "/etc/claude-code/managed-settings.json",
                                                            "/etc/hosts")])
