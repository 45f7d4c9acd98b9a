"""In-sandbox probe: every way out over the network, and the gateway socket misused.

argv[1] is JSON: {"tcp": [[host, port]], "udp": [[host, port]], "abstract": name,
"gateway": socket path, "listener": [host, port]}. Targets are the host's own
listeners only; nothing here addresses a public or private-range host. Prints
one `@@{json}` line per probe.
"""

import errno
import json
import socket
import sys

ARGS = json.loads(sys.argv[1])


def emit(probe, **fields):
    print("@@" + json.dumps({"probe": probe, **fields}, sort_keys=True), flush=True)


def err_name(exc):
    return errno.errorcode.get(exc.errno, type(exc).__name__) if getattr(exc, "errno", None) else type(exc).__name__


def read_lines(path):
    try:
        return open(path).read().splitlines()
    except OSError as exc:
        return ["error:" + err_name(exc)]


# What "no route out" looks like from inside: only loopback, no routes at all.
emit("interfaces", names=[name for _, name in socket.if_nameindex()],
     proc_net_dev=[line.split(":")[0].strip() for line in read_lines("/proc/net/dev")[2:] if ":" in line])
emit("routes", ipv4=read_lines("/proc/net/route")[1:], ipv6=read_lines("/proc/net/ipv6_route"))

# Name lookup: localhost resolves from /etc/hosts (the control); a real name cannot.
for name in ("localhost", "deb.debian.org"):
    try:
        addresses = sorted({info[4][0] for info in socket.getaddrinfo(name, 80, proto=socket.IPPROTO_TCP)})
        emit("dns", name=name, ok=True, addresses=addresses)
    except OSError as exc:
        emit("dns", name=name, ok=False, error=str(exc))

for host, port in ARGS["tcp"]:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(3)
    code = sock.connect_ex((host, port))
    sock.close()
    emit("tcp", host=host, port=port, connected=code == 0, error=errno.errorcode.get(code, str(code)))

for host, port in ARGS["udp"]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sent = sock.sendto(b"agent-eval-sandbox udp probe", (host, port))
        emit("udp", host=host, port=port, sent=sent, error="")
    except OSError as exc:
        emit("udp", host=host, port=port, sent=0, error=err_name(exc))
    finally:
        sock.close()

# An abstract unix socket lives in a network namespace: the host's is not ours.
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect("\0" + ARGS["abstract"])
    emit("abstract_unix", connected=True, error="")
except OSError as exc:
    emit("abstract_unix", connected=False, error=err_name(exc))
finally:
    sock.close()

# Raw and packet sockets need CAP_NET_RAW, which no one here has.
for family, kind, proto, label in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP, "raw_icmp"),
                                   (getattr(socket, "AF_PACKET", 17), socket.SOCK_RAW, 0, "packet")):
    try:
        socket.socket(family, kind, proto).close()
        emit("raw_socket", kind=label, opened=True, error="")
    except OSError as exc:
        emit("raw_socket", kind=label, opened=False, error=err_name(exc))

# vsock is no network namespace's: whether the sandbox can make such a socket at all (it connects nowhere:
# the one peer on these VMs is the hypervisor).
try:
    socket.socket(getattr(socket, "AF_VSOCK", 40), socket.SOCK_STREAM).close()
    emit("vsock", opened=True, error="")
except OSError as exc:
    emit("vsock", opened=False, error=err_name(exc))


def gateway(label, payload, shutdown=True):
    """Send raw bytes to the gateway socket; report the status line it answers with."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    try:
        sock.connect(ARGS["gateway"])
        for chunk in payload:
            sock.sendall(chunk)
        if shutdown:
            sock.shutdown(socket.SHUT_WR)
        reply = b""
        while data := sock.recv(65536):  # to the end: the gateway closes every one of these
            reply += data
        first = reply.split(b"\r\n", 1)[0] if reply.startswith(b"HTTP/") else reply[-400:]
        emit("gateway", label=label, status=first.decode("latin-1"))
    except OSError as exc:
        emit("gateway", label=label, status="error:" + err_name(exc))
    finally:
        sock.close()


def request(method, target, body=b""):
    head = [f"{method} {target} HTTP/1.1", "Host: gateway", f"Content-Length: {len(body)}", "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


listener = "{}:{}".format(*ARGS["listener"])
gateway("models", [request("GET", "/v1/models")])
gateway("complete", [request("POST", "/v1/complete", b'{"prompt": "x"}')])
gateway("batches", [request("POST", "/v1/messages/batches", b"{}")])
gateway("files", [request("GET", "/v1/files")])
gateway("absolute_url", [request("POST", f"http://{listener}/v1/messages", b"{}")])
gateway("connect", [request("CONNECT", listener)])
big = b"A" * (8 << 20)
gateway("huge_body", [request("POST", "/v1/complete", big)])
gateway("claimed_huge_body", [(b"POST /v1/messages HTTP/1.1\r\nHost: gateway\r\n"
                               b"Content-Length: 107374182400\r\n\r\n")], shutdown=False)
# The start of a TLS ClientHello: what a client speaking anything but HTTP sends first.
gateway("not_http", [b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(32)) + b"\r\n\r\n"])
gateway("unknown_method", [request("BREW", "/v1/messages")])
emit("sent_bytes", huge_body=len(big))
