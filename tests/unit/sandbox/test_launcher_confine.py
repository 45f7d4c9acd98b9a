"""The seccomp filter the launcher stacks (inside/confine.py): its decisions for every ABI, read by a
small classic-BPF interpreter, then the filter itself on this machine's kernel, in a child process."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from agent_eval_sandbox.inside import confine
from agent_eval_sandbox.sandbox.image import INSIDE_DIR

ALLOW = "allow"


def decide(arch: int, nr: int, arg0: int = 0) -> str:
    """What the filter returns for one call: "allow", or the errno's number as a string."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    prog, pc, acc = confine.program(), 0, 0
    for _ in range(len(prog)):
        code, jt, jf, k = prog[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35):  # jeq / jge #k
            taken = acc == k if code == 0x15 else acc >= k
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # ret #k
            if k == confine.SECCOMP_RET_ALLOW:
                return ALLOW
            assert k & 0xFFFF0000 == confine.SECCOMP_RET_ERRNO, hex(k)
            return str(k & 0xFFFF)
        else:
            raise AssertionError(f"an instruction the filter should not have: {code:#x}")
        assert 0 <= pc < len(prog), "a jump out of the program"
    raise AssertionError("the program ran past its end")


ABI = {abi.name: abi for abi in confine.ABIS}
VSOCK, INET, UNIX = confine.AF_VSOCK, 2, 1
EPERM, ENOSYS, EAFNOSUPPORT = (str(n) for n in (confine.EPERM, confine.ENOSYS, confine.EAFNOSUPPORT))


@pytest.mark.parametrize("abi", list(ABI))
def test_every_abi_refuses_vsock_and_io_uring_and_allows_the_rest(abi: str) -> None:
    a = ABI[abi]
    for nr in confine.IO_URING:
        assert decide(a.audit_arch, nr) == EPERM
    for nr in (a.socket, a.socketpair):
        assert decide(a.audit_arch, nr, VSOCK) == EAFNOSUPPORT
        assert decide(a.audit_arch, nr, INET) == ALLOW and decide(a.audit_arch, nr, UNIX) == ALLOW
    # Calls with other numbers pass whatever their first argument: the profile beneath decides.
    for nr in (0, 1, 2, 3, 59, 102, 200, 424, 428, 500):
        if nr not in (a.socket, a.socketpair, a.socketcall, *confine.IO_URING):
            assert decide(a.audit_arch, nr, VSOCK) == ALLOW, nr


def test_i386_socketcall_cannot_make_a_socket_or_a_pair_at_all() -> None:
    i386 = ABI["i386"]
    assert decide(i386.audit_arch, 102, confine.SYS_SOCKET) == EAFNOSUPPORT
    assert decide(i386.audit_arch, 102, confine.SYS_SOCKETPAIR) == EAFNOSUPPORT
    for call in (2, 3, 9, 11, 14):  # bind, connect, send, sendto, setsockopt: on sockets made another way
        assert decide(i386.audit_arch, 102, call) == ALLOW


def test_x32_is_refused_whole_and_unknown_abis_are_left_to_the_profile() -> None:
    x86_64 = ABI["x86_64"]
    for nr in (0, 41, 425):
        assert decide(x86_64.audit_arch, confine.X32_SYSCALL_BIT | nr, INET) == ENOSYS
    for arch in (0, 0x80000016, 0xC00000F3):  # none, s390x, riscv64
        assert decide(arch, 41, VSOCK) == ALLOW and decide(arch, 425) == ALLOW


# On this machine's kernel: a child process sets no-new-privileges as the sandbox does, installs the
# filter, and tries what it refuses and what it must not.
_CHILD = r"""
import ctypes, errno, json, os, socket, sys
sys.path.insert(0, sys.argv[1])
import confine
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
found = {"wanted_before": confine.wanted()}
libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
found["wanted"] = confine.wanted()
def sock(family):
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
def io_uring():
    fd = libc.syscall(425, 4, ctypes.create_string_buffer(120))
    if fd < 0:
        return errno.errorcode[ctypes.get_errno()]
    os.close(fd)
    return "ok"
found["before"] = {"vsock": sock(40), "io_uring": io_uring()}
found["installed"] = confine.install()
found["after"] = {"vsock": sock(40), "io_uring": io_uring(), "inet": sock(socket.AF_INET),
                  "unix_pair": len(socket.socketpair())}
r, w = os.pipe()
if os.fork() == 0:  # a child inherits it
    os.write(w, sock(40).encode())
    os._exit(0)
os.wait()
found["child"] = os.read(r, 100).decode()
print(json.dumps(found))
"""


def test_the_filter_on_this_kernel_binds_the_process_and_its_children() -> None:
    done = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD, str(INSIDE_DIR)],
                          capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)
    assert found["wanted_before"] is False and found["wanted"] is True
    assert found["installed"] is None
    assert found["after"] == {"vsock": "EAFNOSUPPORT", "io_uring": "EPERM", "inet": "ok", "unix_pair": 2}
    assert found["child"] == "EAFNOSUPPORT"
    # Against what the kernel did before (this machine has both; if it had neither the test would say little).
    assert found["before"]["io_uring"] == "ok", found["before"]


def test_confine_runs_its_command_under_the_filter_and_fails_closed() -> None:
    script = str(INSIDE_DIR / "confine.py")
    set_nnp = "import ctypes, os, sys; ctypes.CDLL(None).prctl(38, 1, 0, 0, 0); os.execv(sys.argv[1], sys.argv[1:])"
    probe = "import socket; socket.socket(40, socket.SOCK_STREAM)"
    run = subprocess.run([sys.executable, "-I", "-S", "-c", set_nnp, sys.executable, "-I", "-S", script,
                          sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True)
    assert run.returncode == 1 and "Address family not supported" in run.stderr, run.stderr
    # No command: a usage line and 2. A command that is not there: 127, nothing run.
    assert subprocess.run([sys.executable, "-I", "-S", script], capture_output=True).returncode == 2
    missing = subprocess.run([sys.executable, "-I", "-S", script, "/nonexistent/command"], capture_output=True,
                             text=True)
    assert missing.returncode == 127 and "cannot run /nonexistent/command" in missing.stderr
