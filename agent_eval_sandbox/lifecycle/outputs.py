"""`.hook-outputs.yaml` / `.hook-outputs.json`: what a hook hands back to the run.

A before_all / before_each hook may leave one of these files in its working
directory. It is read once, then deleted, whatever its content: `env:` (names
to string values) reaches the agent's environment, `data:` (any mapping) reaches
the run directory and the judges as `outputs["hook_outputs"]`.

The file is written by user scripts and, for container-scope hooks, by code
running next to the skill under test, so it is read as hostile input: a size
cap, the YAML alias/node caps of `yaml_reader`, a symlink is never followed
(opened with O_NOFOLLOW), anything but a regular file is refused. A refusal is
one `HookOutputsError` whose message names the file and the problem; the
lifecycle runner turns it into a failed hook, so `on_failure` applies.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent_eval_sandbox.config.yaml_reader import (
    YamlReadError,
    parse_yaml_text,
)
from agent_eval_sandbox.errors import UserError

OUTPUT_FILE_NAMES = (".hook-outputs.yaml", ".hook-outputs.json")
MAX_OUTPUT_BYTES = 1024 * 1024
# Generous for real outputs, far below what a file of aliases can expand to.
MAX_OUTPUT_NODES = 20_000
KNOWN_KEYS = ("env", "data")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class HookOutputsError(UserError):
    """A `.hook-outputs` file was refused; the message names the file and why."""


@dataclass(frozen=True)
class HookOutputs:
    """`env` and `data` handed back by one or more hooks."""

    env: Mapping[str, str] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)

    def merged(self, later: HookOutputs) -> HookOutputs:
        """Top-level keys of `later` win (a later hook, or a case over the globals)."""
        return HookOutputs(env={**self.env, **later.env}, data={**self.data, **later.data})


@dataclass(frozen=True)
class OutputsFile:
    """One parsed file: its outputs and the warnings it deserves (unknown keys)."""

    source: str
    outputs: HookOutputs
    warnings: tuple[str, ...] = ()


def combine_outputs(files: Sequence[OutputsFile]) -> OutputsFile | None:
    """Several files read after one hook, later ones winning (None when there are none)."""
    if not files:
        return None
    merged = HookOutputs()
    for found in files:
        merged = merged.merged(found.outputs)
    warnings = tuple(warning for found in files for warning in found.warnings)
    return OutputsFile(", ".join(found.source for found in files), merged, warnings)


def parse_hook_outputs(raw: bytes, *, source: str, is_json: bool) -> OutputsFile:
    """Validate the bytes of a `.hook-outputs` file; `source` names it in messages."""
    if len(raw) > MAX_OUTPUT_BYTES:
        raise HookOutputsError(
            f"{source}: larger than {MAX_OUTPUT_BYTES} bytes; refused",
            fix="hand back small values; put bulk data in a file and pass its path",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HookOutputsError(f"{source}: not UTF-8 text (byte {exc.start}); refused") from None
    document = _parse(text, source, is_json)
    if document is None:
        return OutputsFile(source, HookOutputs())
    if not isinstance(document, dict):
        raise HookOutputsError(
            f"{source}: must be a mapping with `env:` and/or `data:`, got {type(document).__name__}; refused"
        )
    unknown = [str(key) for key in document if key not in KNOWN_KEYS]
    warnings = (
        (f"{source}: unknown top-level key(s) {', '.join(unknown)} ignored (only env and data are read)",)
        if unknown
        else ()
    )
    outputs = HookOutputs(env=_env(document.get("env"), source), data=_data(document.get("data"), source))
    return OutputsFile(source, outputs, warnings)


def _parse(text: str, source: str, is_json: bool) -> Any:
    if is_json:
        if not text.strip():
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise HookOutputsError(f"{source}: invalid JSON at line {exc.lineno}: {exc.msg}; refused") from None
        except RecursionError:
            raise HookOutputsError(f"{source}: JSON nested too deeply; refused") from None
    try:
        return parse_yaml_text(text, source, max_nodes=MAX_OUTPUT_NODES)
    except YamlReadError as exc:
        raise HookOutputsError(f"{exc.message}; refused") from None


def _env(value: Any, source: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HookOutputsError(f"{source}: env must be a mapping of NAME: \"value\", got {type(value).__name__}")
    env: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise HookOutputsError(
                f"{source}: env key {key!r} is not a valid environment variable name",
                fix="use letters, digits and _, not starting with a digit",
            )
        if not isinstance(item, str):
            shown = repr(item)[:40]
            raise HookOutputsError(
                f"{source}: env.{key} must be a string, got {type(item).__name__} {shown}",
                fix=f'quote the value, e.g. {key}: "{item}"' if isinstance(item, (int, float, bool)) else None,
            )
        if "\0" in item:
            raise HookOutputsError(f"{source}: env.{key} contains a NUL character, which no environment can hold")
        env[key] = item
    return env


def _data(value: Any, source: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HookOutputsError(f"{source}: data must be a mapping, got {type(value).__name__}")
    bad = [key for key in value if not isinstance(key, str)]
    if bad:
        raise HookOutputsError(f"{source}: data keys must be strings (found {bad[0]!r})", fix="quote the key")
    return dict(value)


def ambiguous_outputs(where: str) -> HookOutputsError:
    """Both names in one directory: which one the hook meant cannot be known."""
    both = " and ".join(OUTPUT_FILE_NAMES)
    return HookOutputsError(f"{where}: both {both} exist; refused", fix="write only one of them")


def take_hook_outputs(directory: Path) -> OutputsFile | None:
    """Read and delete the `.hook-outputs` file in `directory` (None when there is none).

    Both names present is ambiguous and refused. Whatever is found is deleted,
    refused or not, so a later hook never inherits it.
    """
    shown = str(directory)
    present = [directory / name for name in OUTPUT_FILE_NAMES if os.path.lexists(directory / name)]
    if not present:
        return None
    result: OutputsFile | None = None
    failure: HookOutputsError | None = None
    try:
        if len(present) > 1:
            raise ambiguous_outputs(shown)
        source = f"{shown}/{present[0].name}"
        raw = _read_regular_file(present[0], source=source)
        result = parse_hook_outputs(raw, source=source, is_json=present[0].suffix == ".json")
    except HookOutputsError as exc:
        failure = exc
    for path in present:
        problem = _remove(path)
        if problem is not None and failure is None:
            failure = HookOutputsError(
                f"{shown}/{path.name}: could not be deleted after reading ({problem.strerror}); refused"
            )
    if failure is not None:
        raise failure
    return result


def _read_regular_file(path: Path, *, source: str) -> bytes:
    """At most MAX_OUTPUT_BYTES + 1 bytes of `path`, which must be a regular file, not a link."""
    try:
        # O_NONBLOCK: a FIFO planted under the name must not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise HookOutputsError(
                f"{source}: is a symbolic link; refused (links are never followed)", fix="write the file itself"
            ) from None
        raise HookOutputsError(f"{source}: cannot be read ({exc.strerror}); refused") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory, not a regular file" if stat.S_ISDIR(mode) else "not a regular file"
        raise HookOutputsError(f"{source}: is {kind}; refused")
    with os.fdopen(fd, "rb") as handle:
        return handle.read(MAX_OUTPUT_BYTES + 1)


def _remove(path: Path) -> OSError | None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    except OSError as exc:
        return exc
    return None


def write_hook_outputs(path: Path, data: Mapping[str, Any]) -> Path:
    """Hook outputs' `data:` as YAML (the run directory says where: run-level or a case's)."""
    return _dump(path, dict(data))


def _dump(path: Path, document: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(document), sort_keys=False, allow_unicode=True, default_flow_style=False),
                    encoding="utf-8", errors="backslashreplace")
    return path
