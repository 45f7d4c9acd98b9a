"""A seccomp filter stacked on the runtime's: no io_uring and no AF_VSOCK sockets for what runs under it.

Standard library only, no imports of ours: the launcher installs it before it
starts the agent (every process of the agent inherits it and none can remove
it), and a container hook runs under it as

    /usr/bin/python3-agent-eval -I -S /opt/agent-eval/confine.py COMMAND...

(the execute-only interpreter: nothing of the sandbox user's can attach to it
before the filter is on).

Docker 20.10's default profile allows both on the host's kernel: io_uring,
the road of many kernel privilege escalations, and `AF_VSOCK`, a socket
family that reaches the hypervisor of a VM whatever the network namespace
says. A filter only adds refusals to the profile beneath it. What it refuses,
for each ABI a 64-bit kernel runs:

- `io_uring_setup`, `io_uring_enter`, `io_uring_register`: EPERM;
- `socket` and `socketpair` of family `AF_VSOCK`: EAFNOSUPPORT, as on a
  kernel without it; and on i386, whose `socketcall` passes its arguments in
  memory a filter cannot read, `socketcall` to make a socket or a pair at all
  (the direct `socket` call is there, and filtered);
- every x32 call (ENOSYS): nothing here is built for it.

Installing it needs no privilege once no-new-privileges is set, as the
sandbox sets it. An eval that turns that off (`sandbox.no_new_privileges:
false`, so that set-user-ID programs work) gets no filter: installing one
would set no-new-privileges.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

PR_SET_SECCOMP = 22
PR_GET_NO_NEW_PRIVS = 39
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
AF_VSOCK = 40
X32_SYSCALL_BIT = 0x40000000
SYS_SOCKET, SYS_SOCKETPAIR = 1, 8  # socketcall's call numbers

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6] (the low half first).
_NR, _ARCH, _ARG0 = 0, 4, 16
# Classic BPF: load a word, jump if equal / greater or equal, return.
_LD, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06

IO_URING = (425, 426, 427)  # the same numbers in every table since 5.1


class Abi:
    """One syscall table a kernel may be entered by: its audit arch and its numbers."""

    __slots__ = ("name", "audit_arch", "socket", "socketpair", "socketcall", "x32")

    def __init__(self, name: str, audit_arch: int, socket: int, socketpair: int,
                 socketcall: int | None = None, x32: bool = False) -> None:
        self.name, self.audit_arch = name, audit_arch
        self.socket, self.socketpair, self.socketcall, self.x32 = socket, socketpair, socketcall, x32


ABIS = (
    Abi("x86_64", 0xC000003E, socket=41, socketpair=53, x32=True),
    Abi("i386", 0x40000003, socket=359, socketpair=360, socketcall=102),
    Abi("aarch64", 0xC00000B7, socket=198, socketpair=199),
    Abi("arm", 0x40000028, socket=281, socketpair=288),
)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return code, jt, jf, k


def _errno(code: int) -> tuple[int, int, int, int]:
    return _op(_RET, SECCOMP_RET_ERRNO | code)


ALLOW = _op(_RET, SECCOMP_RET_ALLOW)


def _abi_rules(abi: Abi) -> list[tuple[int, int, int, int]]:
    """The checks of one ABI, the syscall number loaded; each ends in a return."""
    rules = [_op(_LD, _NR)]
    if abi.x32:
        rules += [_op(_JGE, X32_SYSCALL_BIT, 0, 1), _errno(ENOSYS)]
    for nr in IO_URING:
        rules += [_op(_JEQ, nr, 0, 1), _errno(EPERM)]
    for nr in (abi.socket, abi.socketpair):
        # The family is the first argument: vsock is refused, anything else of this call allowed.
        rules += [_op(_JEQ, nr, 0, 4), _op(_LD, _ARG0), _op(_JEQ, AF_VSOCK, 0, 1), _errno(EAFNOSUPPORT), ALLOW]
    if abi.socketcall is not None:
        rules += [_op(_JEQ, abi.socketcall, 0, 5), _op(_LD, _ARG0),
                  _op(_JEQ, SYS_SOCKET, 1, 0), _op(_JEQ, SYS_SOCKETPAIR, 0, 1), _errno(EAFNOSUPPORT), ALLOW]
    return [*rules, ALLOW]


def program() -> list[tuple[int, int, int, int]]:
    """The filter: each known ABI's checks, anything else left to the profile beneath."""
    prog = [_op(_LD, _ARCH)]
    for abi in ABIS:
        rules = _abi_rules(abi)
        prog += [_op(_JEQ, abi.audit_arch, 0, len(rules)), *rules]
    return [*prog, ALLOW]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def wanted() -> bool:
    """Whether the filter goes on: no-new-privileges is set (the sandbox's default)."""
    try:
        return bool(_libc().prctl(PR_GET_NO_NEW_PRIVS, 0, None, 0, 0) == 1)
    except (OSError, AttributeError):
        return True  # install() will say what is wrong


def install() -> str | None:
    """Stack the filter on this thread (and all it starts from now on); None once done, else why not.

    Call it before any other thread starts: a filter binds the thread that installs it.
    """
    prog = program()
    code = b"".join(struct.pack("=HBBI", *op) for op in prog)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _Fprog(len(prog), ctypes.addressof(buffer))
    try:
        if _libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as exc:
        return str(exc)
    return None


def apply() -> str | None:
    """`install` where the filter goes on (`wanted`); None if it is on, or not wanted."""
    return install() if wanted() else None


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: confine.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    problem = apply()
    if problem is not None:
        print(f"confine: cannot install the sandbox's seccomp filter ({problem}); not running {argv[0]}",
              file=sys.stderr, flush=True)
        return 126
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"confine: cannot run {argv[0]}: {exc}", file=sys.stderr, flush=True)
        return 127 if isinstance(exc, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
