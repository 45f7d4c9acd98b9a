"""In-sandbox probe: hunt for the answer key with python (stdlib only).

argv[1] is JSON: {"needles": [[parts], ...], "host_paths": [...], "resources": [...]}.
Prints one `@@{json}` line per finding; never the content of what it found,
only where, so that a leak shows as a path and a flag, not as the secret.
"""

import errno
import json
import os
import sys

ARGS = json.loads(sys.argv[1])
NEEDLES = ["".join(parts).encode() for parts in ARGS["needles"]]
SKIP_TOP = ("/proc", "/sys", "/dev")
MAX_READ = 4 << 20


def emit(probe, **fields):
    print("@@" + json.dumps({"probe": probe, **fields}, sort_keys=True), flush=True)


def try_open(path):
    """(ok, errno name, holds a needle) of reading `path` with open()."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_READ)
    except OSError as exc:
        return False, errno.errorcode.get(exc.errno, str(exc.errno)), False
    return True, "", any(needle in data for needle in NEEDLES)


def pids():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


# The exact host paths of the answer key, straight and through every process's
# root and cwd links (which, in a container, point at its own / and cwd). One
# summary line per path keeps the output small enough for the Bash tool.
for path in ARGS["host_paths"]:
    tries = [("direct", path)] + [
        (link, f"/proc/{pid}/{link}{path}") for pid in pids() for link in ("root", "cwd")
    ]
    results = [(via,) + try_open(target) for via, target in tries]
    emit("open", path=path, vias=sorted({via for via, *_ in results}), attempts=len(results),
         opened=sum(ok for _, ok, _, _ in results), leaks=sum(leak for *_, leak in results),
         errors=sorted({err for _, _, err, _ in results if err}))

links = {}
for pid in pids():
    for link in ("root", "cwd"):
        try:
            target = os.readlink(f"/proc/{pid}/{link}")
        except OSError as exc:
            target = "error:" + errno.errorcode.get(exc.errno, str(exc.errno))
        links.setdefault(link, set()).add(target)
emit("proc_links", root=sorted(links.get("root", ())), cwd=sorted(links.get("cwd", ())), pids=len(pids()))

# mountinfo names the host sources of bind mounts: each one is tried from inside.
for pid in ("1", "self"):
    try:
        with open(f"/proc/{pid}/mountinfo") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        emit("mountinfo", pid=pid, error=errno.errorcode.get(exc.errno, str(exc.errno)))
        continue
    for line in lines:
        fields = line.split()
        source, target = fields[3], fields[4]
        if source == "/":
            continue
        hit = False
        if os.path.isdir(source):
            for root, _dirs, files in os.walk(source):
                hit = hit or any(try_open(os.path.join(root, name))[2] for name in files)
        elif os.path.isfile(source):
            hit = try_open(source)[2]
        emit("mount_source", pid=pid, source=source, target=target, exists=os.path.exists(source), leak=hit)

# The read-only project resources: everything visible in them, with its kind.
for root in ARGS["resources"]:
    if not os.path.lexists(root):
        emit("resource", root=root, present=False)
        continue
    entries = []
    if os.path.isfile(root):
        entries.append(("", "file"))
    for current, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(current, name)
            kind = "link" if os.path.islink(full) else "dir" if os.path.isdir(full) else "file"
            entries.append((os.path.relpath(full, root), kind))
    leak = any(try_open(os.path.join(root, rel))[2] for rel, kind in entries if kind == "file")
    emit("resource", root=root, present=True, entries=sorted(entries), leak=leak)

# Every readable file of the filesystem, for the needles; /workspace/input.yaml is the control.
scanned, hits, control = 0, [], False
for top in sorted(os.listdir("/")):
    start = "/" + top
    if start in SKIP_TOP or os.path.islink(start):
        continue
    for current, _dirs, files in os.walk(start):
        for name in files:
            full = os.path.join(current, name)
            try:
                if os.path.islink(full) or os.path.getsize(full) > MAX_READ:
                    continue
            except OSError:
                continue
            ok, _err, leak = try_open(full)
            scanned += ok
            if leak:
                hits.append(full)
            if full == "/workspace/input.yaml" and ok:
                control = True
emit("fs_scan", scanned=scanned, hits=hits, control_read=control)
