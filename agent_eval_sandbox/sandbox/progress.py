"""Progress of long image work on a rich console (nothing is shown without one)."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.status import Status


class Progress:
    """A spinner naming the current step; notable lines are also printed above it."""

    def __init__(self, console: Console | None, title: str) -> None:
        self._console = console
        self._title = title
        self._status: Status | None = None

    def __enter__(self) -> Progress:
        if self._console is not None:
            self._status = self._console.status(escape(self._title))
            self._status.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._status is not None:
            self._status.stop()

    def update(self, line: str) -> None:
        """Show `line` as the spinner's current activity."""
        if self._status is not None and line.strip():
            self._status.update(f"{escape(self._title)}: {escape(line.strip()[:100])}")

    def note(self, line: str) -> None:
        """Print `line` (a step worth keeping on screen) and show it as the activity."""
        if self._console is not None and line.strip():
            self._console.print(f"[dim]{escape(line.rstrip())}[/dim]")
        self.update(line)
