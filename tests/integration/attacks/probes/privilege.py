"""In-sandbox probe: every way up from the sandbox user (stdlib only).

argv[1] is JSON: {"host_pid": the controller's pid on the host}. Prints one
`@@{json}` line per probe.
"""

import ctypes
import errno
import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

ARGS = json.loads(sys.argv[1])
LIBC = ctypes.CDLL(None, use_errno=True)
PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE = 47, 2
PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
CAP_SYS_ADMIN = 21


def emit(probe, **fields):
    print("@@" + json.dumps({"probe": probe, **fields}, sort_keys=True), flush=True)


def err_name(exc):
    return errno.errorcode.get(getattr(exc, "errno", None) or 0, type(exc).__name__)


def libc_errno():
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))


def status_fields(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    except OSError:
        pass
    return fields


def attempt(label, action):
    try:
        action()
        emit("attempt", label=label, ok=True, error="")
    except OSError as exc:
        emit("attempt", label=label, ok=False, error=err_name(exc))


emit("identity", uid=os.getuid(), euid=os.geteuid(), gid=os.getgid(), groups=os.getgroups(),
     kernel=os.uname().release)
me = status_fields("self")
emit("caps", **{k: me.get(k, "") for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")})

# setuid-root binaries are in the image; under no-new-privileges they run as the caller.
setuid = []
for top in ("/usr", "/bin", "/sbin", "/opt"):
    for root, _dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mode & stat.S_ISUID and st.st_uid == 0:
                setuid.append(path)
emit("setuid_files", paths=sorted(setuid))
for argv in (["su", "-c", "id", "root"], ["newgrp", "root"], ["passwd", "root"], ["chsh", "root"]):
    if not any(p.endswith("/" + argv[0]) for p in setuid):
        continue
    # Kept waiting on a password prompt, so its credentials can be read while it runs.
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(0.5)
    running = status_fields(proc.pid)
    proc.kill()
    out, _ = proc.communicate(timeout=10)
    emit("setuid_run", argv=argv, uid_line=running.get("Uid", "(exited)"), output=out.decode("latin-1")[-200:])

attempt("setuid(0)", lambda: os.setuid(0))
attempt("setgid(0)", lambda: os.setgid(0))
attempt("setgroups([0])", lambda: os.setgroups([0]))


def raise_ambient():
    if LIBC.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl")


def capset_all():
    # struct __user_cap_header_struct {u32 version; int pid;} + two data structs (v3)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)(0xFFFFFFFF, 0xFFFFFFFF, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    if LIBC.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


attempt("prctl(PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN)", raise_ambient)
attempt("capset(all)", capset_all)
attempt("chown /workspace to root", lambda: os.chown("/workspace", 0, 0))


# A device node of a disk or of kernel memory: made (gVisor allows it in its own tmpfs), then opened.
for kind, path, mode, dev in (("block 8:0 (sda)", "/tmp/sda", stat.S_IFBLK, (8, 0)),
                              ("char 1:1 (mem)", "/tmp/mem", stat.S_IFCHR, (1, 1))):
    try:
        os.mknod(path, mode | 0o600, os.makedev(*dev))
        made = ""
    except OSError as exc:
        made = err_name(exc)
    try:
        os.close(os.open(path, os.O_RDONLY))
        opened = ""
    except OSError as exc:
        opened = err_name(exc)
    emit("device_node", kind=kind, mknod_error=made, open_error=opened)


def write_file(path):
    with open(path, "w") as handle:
        handle.write("1\n")


for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
             "/proc/sysrq-trigger", "/sys/kernel/uevent_helper", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
             "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/pids.max",
             "/etc/passwd", "/etc/shadow", "/root/.bashrc"):
    attempt(f"write {path}", lambda path=path: write_file(path))
attempt("read /etc/shadow", lambda: Path("/etc/shadow").read_bytes())

# The container runtimes' sockets must not exist; the only sockets are the gateway's and the CLI's own.
sockets = []
for root in ("/run", "/var/run", "/tmp", "/home", "/workspace", "/var"):
    for current, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(current, name)
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    sockets.append(path)
            except OSError:
                pass
emit("sockets", found=sorted({os.path.realpath(path) for path in sockets}),
     runtime_sockets={p: os.path.lexists(p) for p in ("/var/run/docker.sock", "/run/docker.sock",
                                                        "/run/containerd/containerd.sock", "/run/podman/podman.sock")})
try:
    client = socket.socket(socket.AF_UNIX)
    client.connect("/var/run/docker.sock")
    emit("docker_socket_connect", connected=True, error="")
except OSError as exc:
    emit("docker_socket_connect", connected=False, error=err_name(exc))

# Processes: the pid namespace holds only this sandbox's, all of the sandbox user.
procs = []
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    fields = status_fields(pid)
    if fields:
        procs.append({"pid": pid, "uid": fields.get("Uid", "").split()[:1], "name": fields.get("Name", "")})
emit("processes", procs=procs)

# ptrace: a child of ours, the agent CLI (our ancestor), pid 1, and the controller's host pid.
child = subprocess.Popen(["sleep", "30"])
cli = next((p["pid"] for p in procs if p["name"] == "claude"), -1)
targets = {"child": child.pid, "cli": cli, "pid1": 1, "host_controller_pid": ARGS["host_pid"]}
for label, pid in targets.items():
    # SEIZE, unlike ATTACH, does not stop the tracee: a hit is detached again at once.
    result = LIBC.ptrace(PTRACE_SEIZE, pid, 0, 0)
    error = "" if result == 0 else libc_errno()
    if result == 0:
        LIBC.ptrace(PTRACE_DETACH, pid, 0, 0)
    emit("ptrace", target=label, pid=pid, attached=result == 0, error=error)
child.kill()
child.wait()

# /dev holds no disk and no kernel memory.
devices = []
for name in os.listdir("/dev"):
    try:
        mode = os.lstat("/dev/" + name).st_mode
    except OSError:
        continue
    if stat.S_ISBLK(mode) or name in ("mem", "kmem", "port", "kmsg"):
        devices.append(name)
emit("devices", sensitive=sorted(devices))
