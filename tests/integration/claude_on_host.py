"""The real `claude` binary run on the host, the way the sandbox runs it (for component tests)."""

from __future__ import annotations


def host_claude_env(base_url: str, home: str, *, max_retries: int = 2) -> dict[str, str]:
    """The sandbox image's switches, a placeholder key and `base_url` as the model API."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "placeholder",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_MAX_RETRIES": str(max_retries),
        "IS_SANDBOX": "1",  # tests run as root; containers run the CLI as uid 1000
    }


def host_claude_argv(claude_path: str, *flags: str) -> list[str]:
    return [claude_path, "-p", "--output-format", "stream-json", "--verbose",
            "--model", "claude-sonnet-4-5", "--permission-mode", "bypassPermissions", *flags]
