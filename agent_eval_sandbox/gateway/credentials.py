"""The host's model upstream and credentials, as the gateway uses them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agent_eval_sandbox.errors import UserError

DEFAULT_UPSTREAM_URL = "https://api.anthropic.com"
# What the CLI gets instead of a key: the gateway replaces it with the real one on the host.
# Not a secret, but never written where a credential could be (cassettes scrub it).
PLACEHOLDER_API_KEY = "sk-ant-agent-eval-sandbox-placeholder"


@dataclass(frozen=True)
class Credentials:
    # repr=False: a credential must not reach a log or traceback through repr().
    api_key: str | None = field(default=None, repr=False)
    auth_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Credentials:
        """The credentials the `claude` CLI itself would use; one of them must be set."""
        credentials = cls(
            api_key=environ.get("ANTHROPIC_API_KEY") or None,
            auth_token=environ.get("ANTHROPIC_AUTH_TOKEN") or None,
        )
        if not credentials.secrets:
            raise UserError(
                "no model credentials: neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set",
                fix="export one of them (it stays on the host), or run with --offline to use scripted models",
            )
        return credentials

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self.api_key, self.auth_token) if s)

    def headers(self) -> dict[str, str]:
        """Auth headers as the SDK sends them (both when both are set)."""
        headers: dict[str, str] = {}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        if self.auth_token:
            headers["authorization"] = f"Bearer {self.auth_token}"
        return headers


def checked_upstream_url(url: str) -> str:
    """`url` without a trailing slash, if it is an absolute http(s) URL."""
    parsed = urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
        raise UserError(
            f"model upstream {url!r} is not an http(s) base URL",
            fix="set ANTHROPIC_BASE_URL to e.g. https://api.anthropic.com, or unset it",
        )
    return url.rstrip("/")


def upstream_url_from_env(environ: Mapping[str, str]) -> str:
    return checked_upstream_url(environ.get("ANTHROPIC_BASE_URL") or DEFAULT_UPSTREAM_URL)
