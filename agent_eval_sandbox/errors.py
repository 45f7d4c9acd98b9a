"""The errors a user can cause, as one hierarchy.

Every class here is a `UserError`: the CLI prints its message as one line on
stderr and exits 2, never with a traceback. Messages say what is wrong, where
(file and field), and how to fix it. Errors of the layers below (yaml, pydantic,
docker, httpx) are mapped to these at a single boundary with `raise ... from`.
"""

from __future__ import annotations

from pathlib import Path

# Everything str.splitlines() breaks at, spelled as an escape instead.
_LINE_BREAKS = {ord(c): repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}


class UserError(Exception):
    """A problem the user can fix; shown as one line, exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message = message
        self.fix = fix
        super().__init__(self.render())

    def render(self) -> str:
        text = f"{self.message} — {self.fix}" if self.fix else self.message
        # One line, whatever the input it quotes (a key or file name may hold a newline).
        return text.translate(_LINE_BREAKS)


class ConfigError(UserError):
    """eval.yaml (or a file it names) is invalid."""

    def __init__(
        self,
        message: str,
        *,
        file: Path | str | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.file = str(file) if file is not None else None
        self.field = field
        where = ": ".join(p for p in (self.file, field) if p)
        super().__init__(f"{where}: {message}" if where else message, fix=fix)


class DatasetError(UserError):
    """A case directory or one of its files is invalid."""

    def __init__(self, message: str, *, file: Path | str | None = None, fix: str | None = None) -> None:
        self.file = str(file) if file is not None else None
        super().__init__(f"{self.file}: {message}" if self.file else message, fix=fix)


class StrictModeError(UserError):
    """`--strict` and the eval has warnings."""


class TemplateError(UserError):
    """A template could not be rendered for a case."""


class DockerUnavailableError(UserError):
    """No usable Docker daemon."""


class ImageError(UserError):
    """The sandbox image (or its base) is missing and cannot be built."""


class RuntimeNotRegisteredError(UserError):
    """The configured container runtime is not registered with the daemon."""


class UnsafeArchiveError(UserError):
    """An archive copied out of a sandbox tried to escape or exceeded a cap."""


class CopyOutInterrupted(Exception):
    """A copy-out stopped part-way because the run was interrupted (Ctrl-C/SIGTERM): what the agent
    left is not waited for, however much of it there is."""


class RunDirError(UserError):
    """A run directory is missing or not a run of this tool."""
