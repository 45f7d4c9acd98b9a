"""How much the commands say: `-q/--quiet`, the default, `-v/--verbose` — one setting for every command.

Two sinks follow it. The rich consoles a command prints progress, tables and warnings on
(`err_console()`) are silent under -q. The `agent_eval_sandbox` logger carries the detail: its
`info` lines (what happens before the first case) show by default, its `debug` lines (each stage of a
case, docker and image decisions) only under -v, and under -q only errors. What a command exists to
print (the verdict line, `--json`, `show`) and errors are printed whatever the setting.
"""

from __future__ import annotations

import enum
import logging
import sys

import click
from rich.console import Console

LOGGER = "agent_eval_sandbox"

class Level(enum.IntEnum):
    QUIET = 0
    NORMAL = 1
    VERBOSE = 2


_LOG_LEVELS = {Level.QUIET: logging.ERROR, Level.NORMAL: logging.INFO, Level.VERBOSE: logging.DEBUG}
_level = Level.NORMAL


class _StderrHandler(logging.Handler):
    """Writes to the sys.stderr of the moment, so a rich live display (which swaps it) or a test's
    capture sees the line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a log line must never end a run
            self.handleError(record)


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {message}"
        return f"debug: {message}" if record.levelno < logging.INFO else message


_handler = _StderrHandler()
_handler.setFormatter(_Format())


def set_level(level: Level) -> None:
    global _level
    _level = level
    logger = logging.getLogger(LOGGER)
    logger.setLevel(_LOG_LEVELS[level])
    if _handler not in logger.handlers:
        logger.addHandler(_handler)
    logger.propagate = False


def level() -> Level:
    return _level


def quiet() -> bool:
    return _level is Level.QUIET


def err_console() -> Console:
    """The console for progress and warnings on stderr; says nothing under -q.
    (soft_wrap: a warning is one line, however narrow the terminal, or none in CI.)"""
    return Console(stderr=True, soft_wrap=True, quiet=quiet())


_SEEN = "agent_eval_sandbox.verbosity"  # ctx.meta key: shared by a group's context and its command's


def _chosen(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    chosen = Level.VERBOSE if param.name == "verbose" else Level.QUIET
    seen: set[Level] = ctx.meta.setdefault(_SEEN, set())
    if (Level.QUIET if chosen is Level.VERBOSE else Level.VERBOSE) in seen:
        raise click.UsageError("-v/--verbose and -q/--quiet are exclusive")
    seen.add(chosen)
    set_level(chosen)


def begin(ctx: click.Context) -> None:
    """At the start of an invocation (the top group's body): the level its options chose so far, else
    the default — not what an earlier invocation in the same process left."""
    seen = ctx.meta.get(_SEEN) or {Level.NORMAL}
    set_level(next(iter(seen)))


def add_options(command: click.Command) -> None:
    """-v/--verbose and -q/--quiet on `command` and, for a group, on every command under it: one
    mechanism, so no command lacks them (`agent-eval-sandbox -q run` and `run -q` both work)."""
    command.params += [
        click.Option(["-v", "--verbose"], is_flag=True, expose_value=False, callback=_chosen,
                     help="Also print debug detail: each stage of a case, docker and image decisions."),
        click.Option(["-q", "--quiet"], is_flag=True, expose_value=False, callback=_chosen,
                     help="Print only errors and the final verdict line."),
    ]
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_options(sub)
