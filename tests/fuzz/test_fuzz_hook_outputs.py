"""`.hook-outputs.yaml|json`, as a hook (or code beside the skill) may leave them:
a clear HookOutputsError or clean outputs, links never followed, nothing outside touched."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agent_eval_sandbox.lifecycle.outputs import (
    OUTPUT_FILE_NAMES,
    HookOutputsError,
    OutputsFile,
    parse_hook_outputs,
    take_hook_outputs,
)

from .checks import outcome, snapshot
from .strategies import VALUES, YAML_TEXT, dump

ENV_NAMES = st.sampled_from(["PATH", "X", "_A1", "1BAD", "A-B", "", "A B", "Ä"]) | st.text(max_size=8)
DOCUMENTS = st.one_of(
    VALUES,
    st.fixed_dictionaries({}, optional={"env": st.dictionaries(ENV_NAMES, VALUES, max_size=4) | VALUES,
                                        "data": VALUES, "extra": VALUES}),
)
RAW = st.one_of(
    DOCUMENTS.map(dump).map(str.encode),
    DOCUMENTS.map(lambda d: json.dumps(d, default=str)).map(str.encode),
    YAML_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=256),
)
# What may sit under each of the two names: nothing, a file, a link, a directory, a FIFO, a hardlink.
KINDS = st.sampled_from(["absent", "file", "symlink_out", "dangling", "dir", "fifo", "hardlink_out"])
SECRET_OUTPUTS = b"env: {STOLEN: from-outside}\ndata: {stolen: true}\n"


def _check(found: OutputsFile | HookOutputsError | None) -> None:
    if isinstance(found, OutputsFile):
        env = found.outputs.env
        assert all(isinstance(k, str) and isinstance(v, str) and "\0" not in v for k, v in env.items())
        assert all(isinstance(k, str) for k in found.outputs.data)
        json.dumps(dict(found.outputs.data), default=str)


@given(RAW, st.booleans())
def test_parse_any_bytes(raw: bytes, is_json: bool) -> None:
    _check(outcome(lambda: parse_hook_outputs(raw, source="x/.hook-outputs", is_json=is_json),
                   expected=HookOutputsError))


def _plant(path: Path, kind: str, raw: bytes, outside: Path) -> None:
    if kind == "file":
        path.write_bytes(raw)
    elif kind == "symlink_out":
        os.symlink(outside, path)
    elif kind == "dangling":
        os.symlink(outside.parent / "missing", path)
    elif kind == "dir":
        path.mkdir()
        (path / "inner").write_bytes(raw)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "hardlink_out":
        os.link(outside, path)


@given(st.tuples(KINDS, KINDS), RAW)
def test_take_reads_regular_files_only_and_leaves_nothing(kinds: tuple[str, str], raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workdir, elsewhere = root / "hook-cwd", root / "elsewhere"
        workdir.mkdir()
        elsewhere.mkdir()
        outside = elsewhere / "outputs.yaml"
        outside.write_bytes(SECRET_OUTPUTS)
        for name, kind in zip(OUTPUT_FILE_NAMES, kinds, strict=True):
            _plant(workdir / name, kind, raw, outside)
        before = snapshot(elsewhere)
        found = outcome(lambda: take_hook_outputs(workdir), expected=HookOutputsError)
        _check(found)
        # whatever was there is gone; what the links pointed at is untouched and was never read
        assert not any(os.path.lexists(workdir / name) for name in OUTPUT_FILE_NAMES)
        assert snapshot(elsewhere) == before
        if isinstance(found, OutputsFile) and "symlink_out" in kinds:
            assert "STOLEN" not in found.outputs.env
        if kinds == ("absent", "absent"):
            assert found is None


@given(st.dictionaries(st.text(max_size=6), VALUES, max_size=4))
def test_a_valid_file_round_trips(data: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / OUTPUT_FILE_NAMES[1]
        path.write_text(json.dumps({"env": {"A": "1"}, "data": data}, default=str))
        found = take_hook_outputs(Path(tmp))
        assert found is not None and found.outputs.env == {"A": "1"}
        assert set(found.outputs.data) == set(data)
