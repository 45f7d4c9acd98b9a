"""Error responses in the Messages API's format.

Clients (the CLI, the SDK) read `error.type` and `error.message` from these,
and decide whether to retry from the HTTP status.
"""

from __future__ import annotations

from typing import Any

STATUS_BY_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
TYPE_BY_STATUS: dict[int, str] = {status: kind for kind, status in STATUS_BY_TYPE.items()}


def error_type_for(status: int) -> str:
    if status in TYPE_BY_STATUS:
        return TYPE_BY_STATUS[status]
    return "invalid_request_error" if 400 <= status < 500 else "api_error"


def error_body(error_type: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}}
