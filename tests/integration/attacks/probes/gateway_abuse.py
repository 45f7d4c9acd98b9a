"""In-sandbox probe: the case's budget, the gateway's policy and the host's resources,
attacked straight through the sockets mounted at /run/agent-eval.

argv[1] is a file holding JSON (the case's input.yaml, written as JSON): {"mode": ...,
plus the mode's settings}. Prints `@@{json}` lines. Modes:

- burst:    `n` slow Messages requests at once; the status each got.
- cutoff:   a streamed request, hung up on as soon as message_start arrives.
- policy:   requests for a model, server tools and features the eval does not allow,
            an absurd max_tokens, and a beta that enables MCP.
- forge:    forged PreToolUse events on the broker's socket: huge questions,
            many small questions, huge Write events.
- flood:    `count` idle connections to each socket, held for `hold_s`.
- neighbour: nothing hostile; takes its time beside the others.

Every model request names, by its number of assistant turns, the scripted
step that answers it (the scripted server picks steps that way).
"""

import json
import resource
import socket
import sys
import threading
import time

ARGS = json.load(open(sys.argv[1]))
GATEWAY = "/run/agent-eval/gateway.sock"
BROKER = "/run/agent-eval/broker.sock"
MODEL = "claude-sonnet-4-6"


def emit(probe, **fields):
    print("@@" + json.dumps({"probe": probe, **fields}, sort_keys=True), flush=True)


def messages(turns, pad=0, marker="probe"):
    """`turns` assistant turns (the scripted step), the first user message padded to `pad` bytes."""
    out = [{"role": "user", "content": marker + "x" * pad}]
    for n in range(turns):
        out += [{"role": "assistant", "content": f"turn {n}"}, {"role": "user", "content": "go on"}]
    return out


def http(body, headers=(), target="/v1/messages", read_all=True):
    """POST a JSON body to the gateway; (status, response body or the first bytes)."""
    payload = json.dumps(body).encode()
    head = [f"POST {target} HTTP/1.1", "Host: gateway", "Content-Type: application/json",
            "anthropic-version: 2023-06-01", "x-api-key: whatever-the-sandbox-has",
            f"Content-Length: {len(payload)}", "Connection: close", *headers]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(120)
    sock.connect(GATEWAY)
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
    if not read_all:
        return sock
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data.partition(b"\r\n\r\n")[2].decode("utf-8", "replace")


def burst():
    statuses = []

    def one():
        body = {"model": MODEL, "max_tokens": ARGS["max_tokens"], "messages": messages(ARGS["turns"], ARGS["pad"])}
        statuses.append(http(body)[0])

    threads = [threading.Thread(target=one) for _ in range(ARGS["n"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    emit("burst", statuses=sorted(statuses))


def cutoff():
    body = {"model": MODEL, "max_tokens": ARGS["max_tokens"], "stream": True, "messages": messages(ARGS["turns"])}
    sock = http(body, read_all=False)
    received = b""
    while b"message_start" not in received:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    sock.close()  # long before message_delta: the rest of the answer is never read
    emit("cutoff", received=len(received), saw_start=b"message_start" in received)


def policy():
    turns = ARGS["turns"]
    base = {"model": MODEL, "max_tokens": 1000, "messages": messages(turns, marker="policy-probe")}
    cases = {
        "other_model": {**base, "model": "claude-opus-4-6"},
        "web_fetch": {**base, "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]},
        "web_search": {**base, "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]},
        "mcp_servers": {**base, "mcp_servers": [{"type": "url", "url": "http://127.0.0.1:9/mcp", "name": "m"}]},
        "container": {**base, "container": {"skills": [{"type": "anthropic", "skill_id": "xlsx"}]}},
        "url_image": {**base, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "url", "url": "http://127.0.0.1:9/x.png"}}]}]},
        "absurd_max_tokens": {**base, "max_tokens": 10**9},
    }
    for label, body in cases.items():
        status, text = http(body)
        emit("policy", label=label, status=status, answer=text[:300])
    status, text = http(base, headers=["anthropic-beta: mcp-client-2025-04-04,claude-code-20250219"])
    emit("policy", label="mcp_beta", status=status, answer=text[:300])


def broker(event_bytes):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(120)
    try:
        sock.connect(BROKER)
        sock.sendall(b"agent-eval-hook/1\n" + event_bytes)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return json.loads(data).get("decision", "?")
    except (OSError, ValueError) as exc:
        return f"error:{type(exc).__name__}"
    finally:
        sock.close()


def event(tool_name, tool_input, tool_use_id):
    return json.dumps({"session_id": "forged", "hook_event_name": "PreToolUse", "tool_name": tool_name,
                       "tool_input": tool_input, "tool_use_id": tool_use_id}).encode()


def question(text):
    options = [{"label": "High", "description": "h"}, {"label": "Normal", "description": "n"}]
    return {"questions": [{"question": text, "header": "Pick", "multiSelect": False, "options": options}]}


def forge():
    started = time.monotonic()
    huge = "Q" * ARGS["huge_chars"]
    results = {"huge": [], "small": [], "write": []}
    for n in range(ARGS["huge"]):
        results["huge"].append(broker(event("AskUserQuestion", question(huge + str(n)), f"toolu_huge_{n}")))
    for n in range(ARGS["small"]):
        results["small"].append(broker(event("AskUserQuestion", question(f"Priority {n}?"), f"toolu_small_{n}")))
    content = "W" * ARGS["write_bytes"]
    for n in range(ARGS["writes"]):
        write = event("Write", {"file_path": f"/workspace/f{n}", "content": content}, f"toolu_write_{n}")
        results["write"].append(broker(write))
    summary = {kind: {d: decisions.count(d) for d in set(decisions)} for kind, decisions in results.items()}
    emit("forge", decisions=summary, seconds=round(time.monotonic() - started, 1))


def connect(path, deadline):
    """A connection to `path`, waiting (until `deadline`) while its listen queue is full:
    a unix socket answers EAGAIN then instead of waiting."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    while True:
        try:
            sock.connect(path)
            return sock
        except BlockingIOError:
            if time.monotonic() > deadline:
                sock.close()
                return None
            time.sleep(0.001)
        except OSError:
            sock.close()
            return None


def flood():
    """Both floods at once, held together: what the host holds for them is what is measured."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    floods = {}
    for path in (GATEWAY, BROKER):
        opened, failed = [], 0
        deadline = time.monotonic() + 30
        for _ in range(ARGS["count"]):
            sock = connect(path, deadline)
            if sock is None:
                failed += 1
            else:
                opened.append(sock)
        floods[path] = (opened, failed)
    time.sleep(2)
    for path, (opened, failed) in floods.items():
        closed_by_host = 0
        for sock in opened:
            try:
                while sock.recv(65536):  # a refused broker connection gets its deny first
                    pass
                closed_by_host += 1
            except BlockingIOError:
                pass  # still open: held by the host
            except OSError:
                closed_by_host += 1
        emit("flood", socket=path, opened=len(opened), connect_failed=failed, closed_by_host=closed_by_host,
             held=len(opened) - closed_by_host, nofile=[soft, hard])
    time.sleep(ARGS["hold_s"])
    for opened, _ in floods.values():
        for sock in opened:
            sock.close()


def neighbour():
    time.sleep(ARGS["sleep_s"])
    emit("neighbour", ok=True)


{"burst": burst, "cutoff": cutoff, "policy": policy, "forge": forge, "flood": flood,
 "neighbour": neighbour}[ARGS["mode"]]()
