"""Which recorded exchange answers each request of a replayed case, and what to say when none does (pure).

Positions: a request is answered by the first exchange of the cassette, in
the order the recorded requests arrived (`seq`), that is not served yet and
has the same method, path and normalised body (gateway/normalise.py). So
requests that interleave — the main agent, its subagents, a retry — find
their own exchanges whatever order they come in this time, and requests with
equal bodies (a retry after a recorded 529) are answered in recorded order.

Drift: the first request that matches nothing is a mismatch, and it sticks —
it and every later request of the case are refused, so the CLI stops instead
of going on with answers that do not belong to its conversation. A case that
ends with exchanges never asked for is a mismatch too. Either way the
mismatch says where, and holds a diff of the nearest recorded request (the
unserved one sharing most lines with it) against what was sent, both
normalised. When the two differ in how many background-task notifications
they hold, the summary says so: where a background agent's notification lands
is the CLI's timing, not a change in the eval, so another replay may match.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_eval_sandbox.gateway.cassette import Cassette, Entry
from agent_eval_sandbox.gateway.normalise import normalise_request, request_key

# What a diff shows: lines of context around each change, at most this many lines, each cut at this length.
DIFF_CONTEXT = 3
DIFF_MAX_LINES = 400
LINE_MAX_CHARS = 400
SUMMARY_VALUE_CHARS = 100
# How the CLI tells the main agent that a background agent finished (in a system reminder).
TASK_NOTIFICATION = "<task-notification>"
TIMING_HINT = ("; a background agent's notification came at another point of the conversation than when "
               "recorded: that is the CLI's timing, not a change in the eval, and replaying again may match")


@dataclass(frozen=True)
class Mismatch:
    summary: str  # one line: where, and the first difference
    diff: str  # the normalised expected request against the actual one (unified diff, shortened)


def flat_lines(value: Any, path: str = "") -> list[str]:
    """A JSON value as `path: line` lines, one per line of each string: what diffs are taken over."""
    if isinstance(value, Mapping):
        lines: list[str] = []
        for key in sorted(value, key=str):
            lines += flat_lines(value[key], f"{path}.{key}" if path else str(key))
        return lines or [f"{path}: {{}}"]
    if isinstance(value, list):
        lines = []
        for index, item in enumerate(value):
            lines += flat_lines(item, f"{path}[{index}]")
        return lines or [f"{path}: []"]
    if isinstance(value, str):
        return [f"{path}: {line}" for line in value.split("\n")]
    return [f"{path}: {json.dumps(value)}"]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"…[{len(text) - limit} more chars]"


def request_diff(expected: list[str], actual: list[str], expected_name: str, actual_name: str) -> str:
    diff = list(difflib.unified_diff(expected, actual, expected_name, actual_name, n=DIFF_CONTEXT, lineterm=""))
    shown = [_cut(line, LINE_MAX_CHARS) for line in diff[:DIFF_MAX_LINES]]
    if len(diff) > DIFF_MAX_LINES:
        shown.append(f"… {len(diff) - DIFF_MAX_LINES} more diff lines")
    return "\n".join(shown) + "\n"


def first_difference(expected: list[str], actual: list[str]) -> str:
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, expected, actual, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        before = expected[i1] if i1 < i2 else "(nothing)"
        after = actual[j1] if j1 < j2 else "(nothing)"
        return f"expected {_cut(before, SUMMARY_VALUE_CHARS)!r}, got {_cut(after, SUMMARY_VALUE_CHARS)!r}"
    return "the bodies differ"


def _notifications(lines: list[str]) -> int:
    return sum(TASK_NOTIFICATION in line for line in lines)


class Matcher:
    """One replayed case's cassette being served. Not thread-safe: its server holds a lock around it."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette
        self._entries = list(cassette.entries)
        self._keys = [request_key(e.method, e.path, e.request) for e in self._entries]
        self._served = [False] * len(self._entries)
        self._requests = 0
        self.mismatch: Mismatch | None = None

    @property
    def served(self) -> int:
        return sum(self._served)

    def take(self, method: str, path: str, body: Any) -> Entry | Mismatch:
        """The exchange that answers this request, or the case's mismatch."""
        number = self._requests = self._requests + 1
        if self.mismatch is not None:
            return self.mismatch
        key = request_key(method, path, body)
        for index, recorded in enumerate(self._keys):
            if recorded == key and not self._served[index]:
                self._served[index] = True
                return self._entries[index]
        self.mismatch = self._no_match(number, method, path, body)
        return self.mismatch

    def verdict(self) -> Mismatch | None:
        """The case's mismatch once it is over: a request that matched nothing, or exchanges never asked for."""
        if self.mismatch is not None:
            return self.mismatch
        unserved = [e for e, served in zip(self._entries, self._served, strict=True) if not served]
        if not unserved:
            return None
        first = unserved[0]
        expected = flat_lines(normalise_request(first.request))
        summary = (f"replay mismatch: the case made {self._requests} request(s) and the cassette holds "
                   f"{len(self._entries)}: {len(unserved)} recorded exchange(s) were never asked for, the first "
                   f"seq {first.seq} ({first.method} {first.path}) — the agent stopped earlier than it did when "
                   "recorded")
        diff = request_diff(expected, [], f"cassette seq {first.seq} (expected)", "(no such request was made)")
        return Mismatch(summary, diff)

    def _no_match(self, number: int, method: str, path: str, body: Any) -> Mismatch:
        actual = flat_lines(normalise_request(body))
        nearest = self._nearest(method, path, actual)
        where = f"request {number} of the replay ({method} {path}) matches no unserved exchange of the cassette"
        if nearest is None:
            return Mismatch(f"replay mismatch: {where}: the cassette holds no exchange",
                            request_diff([], actual, "(empty cassette)", f"request {number} (actual)"))
        entry, expected = nearest
        left = len(self._entries) - self.served
        detail = (f"nearest is seq {entry.seq} ({entry.method} {entry.path}): {first_difference(expected, actual)}"
                  if left else f"all {len(self._entries)} recorded exchanges were served already; "
                               f"the nearest was seq {entry.seq}: {first_difference(expected, actual)}")
        if _notifications(expected) != _notifications(actual):
            detail += TIMING_HINT
        return Mismatch(f"replay mismatch: {where}; {detail}",
                        request_diff(expected, actual, f"cassette seq {entry.seq} (expected)",
                                     f"request {number} of the replay (actual)"))

    def _nearest(self, method: str, path: str, actual: list[str]) -> tuple[Entry, list[str]] | None:
        """The recorded request most like `actual`: unserved ones first, the same method and path first,
        then the one sharing most lines, then the earliest."""
        pools: Sequence[list[int]] = (
            [i for i, e in enumerate(self._entries) if not self._served[i] and (e.method, e.path) == (method, path)],
            [i for i in range(len(self._entries)) if not self._served[i]],
            list(range(len(self._entries))),
        )
        pool = next((p for p in pools if p), [])
        if not pool:
            return None
        wanted = set(actual)
        best: tuple[int, int, list[str]] | None = None
        for index in pool:
            lines = flat_lines(normalise_request(self._entries[index].request))
            shared = len(wanted.intersection(lines))
            if best is None or shared > best[0]:
                best = (shared, index, lines)
        assert best is not None
        return self._entries[best[1]], best[2]
