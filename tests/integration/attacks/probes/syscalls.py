"""In-sandbox probe: the calls the sandbox's stacked seccomp filter refuses, by every road a process has.

argv[1] is JSON: {"who": a label}. Prints one `@@{json}` line per probe. Nothing here connects
anywhere: a vsock socket is made and closed, an io_uring set up and closed.

- `native`: the 64-bit calls (socket and socketpair of AF_VSOCK, io_uring_setup), and the
  controls that must still work (an AF_INET socket, an AF_UNIX pair);
- `i386`: the same through `int 0x80`, the 32-bit table a 64-bit x86 kernel also serves, from
  code this probe writes into memory of its own (socket of AF_VSOCK, socketcall's SOCKET,
  io_uring_setup), in a child process: a kernel or runtime without that table may kill it;
- `status`: the process's seccomp fields.
"""

import ctypes
import errno
import json
import mmap
import os
import platform
import socket
import sys

ARGS = json.loads(sys.argv[1])
WHO = ARGS["who"]
AF_VSOCK = 40
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def emit(probe, **fields):
    print("@@" + json.dumps({"probe": probe, "who": WHO, **fields}, sort_keys=True), flush=True)


def name(code):
    return errno.errorcode.get(code, str(code))


def call(nr, *args):
    """A raw syscall: "ok" (the descriptor closed) or the errno's name."""
    result = libc.syscall(nr, *args)
    if result < 0:
        return name(ctypes.get_errno())
    os.close(result)
    return "ok"


def sock(family, kind):
    try:
        socket.socket(family, kind).close()
        return "ok"
    except OSError as exc:
        return name(exc.errno)


NATIVE = {"x86_64": {"socketpair": 53, "io_uring_setup": 425}, "aarch64": {"socketpair": 199, "io_uring_setup": 425}}
numbers = NATIVE.get(platform.machine(), NATIVE["x86_64"])
pair = (ctypes.c_int * 2)()
paired = libc.syscall(numbers["socketpair"], AF_VSOCK, socket.SOCK_STREAM, 0, pair)
emit("native",
     vsock_socket=sock(AF_VSOCK, socket.SOCK_STREAM),
     vsock_socketpair=name(ctypes.get_errno()) if paired < 0 else "ok",
     io_uring_setup=call(numbers["io_uring_setup"], 8, ctypes.create_string_buffer(120)),
     inet_socket=sock(socket.AF_INET, socket.SOCK_STREAM),
     unix_socketpair="ok" if len(socket.socketpair()) == 2 else "no")


def int80(nr, a, b, c):
    """push rbx; mov eax, nr; mov ebx, a; mov ecx, b; mov edx, c; int 0x80; pop rbx; ret"""
    code = (b"\x53\xb8" + nr.to_bytes(4, "little") + b"\xbb" + a.to_bytes(4, "little") + b"\xb9"
            + b.to_bytes(4, "little") + b"\xba" + c.to_bytes(4, "little") + b"\xcd\x80\x5b\xc3")
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    result = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
    return "ok" if result >= 0 else name(-result)


if platform.machine() == "x86_64":
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        try:
            found = {"vsock_socket": int80(359, AF_VSOCK, 1, 0), "inet_socket": int80(359, 2, 1, 0),
                     "socketcall_socket": int80(102, 1, 0, 0), "io_uring_setup": int80(425, 8, 0, 0)}
        except Exception as exc:  # noqa: BLE001 - whatever it was, the parent reports it
            found = {"error": repr(exc)}
        os.write(write_end, json.dumps(found).encode())
        os._exit(0)
    os.close(write_end)
    data = b""
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        data += chunk
    _, status = os.waitpid(child, 0)
    fields = json.loads(data) if data else {}
    emit("i386", killed_by=os.WTERMSIG(status) if os.WIFSIGNALED(status) else None, **fields)

status_lines = open("/proc/self/status").read().splitlines()
emit("status", **{key: value.strip() for key, _, value in (line.partition(":") for line in status_lines)
                  if key in ("Seccomp", "Seccomp_filters", "NoNewPrivs")})
