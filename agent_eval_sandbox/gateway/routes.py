"""Which requests a Messages API endpoint of ours answers.

The gateway's allowlist is exactly this: the skill under test may use its
socket for model calls and nothing else.
"""

from __future__ import annotations

import enum
from urllib.parse import urlsplit


class Route(enum.Enum):
    PROBE = "probe"  # connectivity check, answered locally
    MESSAGES = "messages"
    COUNT_TOKENS = "count_tokens"
    OTHER = "other"


# `HEAD /` (older CLIs) and `HEAD /api/hello` (2.1.332 when non-essential
# traffic is not disabled) only check that the server is there.
PROBE_PATHS = frozenset({"/", "/api/hello"})


def split_target(target: str) -> tuple[str, str] | None:
    """(path, query) of an origin-form request target; None for anything else.

    `//host/path` and absolute URLs are refused so that nothing a client sends
    can change which host a request goes to.
    """
    if not target.startswith("/") or target.startswith("//"):
        return None
    parts = urlsplit(target)
    return parts.path, parts.query


def classify(method: str, target: str) -> Route:
    split = split_target(target)
    if split is None:
        return Route.OTHER
    path = split[0]
    if method in ("HEAD", "GET") and path in PROBE_PATHS:
        return Route.PROBE
    if method == "POST" and path == "/v1/messages":
        return Route.MESSAGES
    if method == "POST" and path == "/v1/messages/count_tokens":
        return Route.COUNT_TOKENS
    return Route.OTHER
