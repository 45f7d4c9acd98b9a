"""Progress while a run runs, and the final table.

On a terminal: a live table (case, state, elapsed, cost). Elsewhere (CI logs):
one line each time a case changes state, so the log reads top to bottom. When
an exception (a second Ctrl-C) ends the display, the table stays on screen
with the run directory under it; otherwise the caller prints the final one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from agent_eval_sandbox.runner.context import CaseStatus


def status_table(statuses: Sequence[CaseStatus], title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    table.add_column("case")
    table.add_column("state")
    table.add_column("elapsed", justify="right")
    table.add_column("cost", justify="right")
    for status in statuses:
        style = {"done": "green", "queued": "dim", "interrupted": "magenta"}.get(
            status.state, "yellow" if status.finished is None else "red")
        table.add_row(status.id, f"[{style}]{status.state}[/]", f"{status.elapsed:.1f}s", f"${status.cost:.4f}")
    return table


class ProgressDisplay:
    """Context manager that shows `statuses` until the run ends."""

    def __init__(self, statuses: Sequence[CaseStatus], console: Console, *, enabled: bool = True,
                 run_dir: Path | None = None) -> None:
        self._statuses = statuses
        self._console = console
        self._run_dir = run_dir
        self._enabled = enabled
        self._live: Live | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: dict[str, str] = {}

    def __enter__(self) -> ProgressDisplay:
        if not self._enabled:
            return self
        if self._console.is_terminal:
            self._live = Live(status_table(self._statuses), console=self._console, refresh_per_second=4,
                              transient=True)
            self._live.__enter__()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            self.refresh()

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(status_table(self._statuses))
            return
        for status in self._statuses:
            if self._last.get(status.id) != status.state:
                self._last[status.id] = status.state
                if status.state != "queued":
                    self._console.print(f"  {status.id}: {status.state} ({status.elapsed:.1f}s, ${status.cost:.4f})",
                                        highlight=False)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._enabled:
            self.refresh()
        if self._live is not None:
            if exc_type is not None:
                self._live.transient = False  # the run is being torn down: leave the last table on screen
            self._live.__exit__(exc_type, exc, tb)
        if exc_type is not None and self._enabled and self._run_dir is not None:
            self._console.print(f"stopped; what finished is in {self._run_dir}", highlight=False, markup=False)
