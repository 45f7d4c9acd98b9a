"""`.hook-outputs` files: validation, hostile files, read-then-delete, run-dir documents."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from agent_eval_sandbox.lifecycle.outputs import (
    MAX_OUTPUT_BYTES,
    HookOutputs,
    HookOutputsError,
    combine_outputs,
    parse_hook_outputs,
    take_hook_outputs,
    write_hook_outputs,
)

BILLION_LAUGHS = "\n".join(
    ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    + [f"{n}: &{n} [{','.join([f'*{p}'] * 9)}]" for p, n in zip("abcdef", "bcdefg", strict=True)]
)


def parse(text: str, source: str = "/ws/.hook-outputs.yaml"):
    return parse_hook_outputs(text.encode(), source=source, is_json=source.endswith(".json"))


def test_env_and_data_are_read():
    found = parse("env:\n  TOKEN: abc\n  PORT: '8099'\ndata:\n  seeded_rows: 42\n  nested: {a: [1, 2]}\n")
    assert found.outputs.env == {"TOKEN": "abc", "PORT": "8099"}
    assert found.outputs.data == {"seeded_rows": 42, "nested": {"a": [1, 2]}}
    assert found.warnings == ()


def test_json_file_is_parsed_as_json():
    found = parse(json.dumps({"env": {"A": "1"}, "data": {"n": 1}}), source="/ws/.hook-outputs.json")
    assert found.outputs == HookOutputs(env={"A": "1"}, data={"n": 1})
    with pytest.raises(HookOutputsError, match="invalid JSON"):
        parse("env: {A: '1'}\n", source="/ws/.hook-outputs.json")  # YAML is not JSON


@pytest.mark.parametrize("text", ["", "# nothing\n", "null\n", "env:\ndata:\n"])
def test_empty_file_is_empty_outputs(text):
    assert parse(text).outputs == HookOutputs()


def test_unknown_top_level_key_is_a_warning_not_a_refusal():
    found = parse("env: {A: b}\nextra: 1\nmore: 2\n")
    assert found.outputs.env == {"A": "b"}
    assert found.warnings == (
        "/ws/.hook-outputs.yaml: unknown top-level key(s) extra, more ignored (only env and data are read)",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("env:\n  PORT: 8099\n", r"env\.PORT must be a string, got int 8099 — quote the value, e\.g\. PORT: \"8099\""),
        ("env:\n  DEBUG: true\n", r"env\.DEBUG must be a string, got bool True"),
        ("env:\n  on: x\n", r"env key True is not a valid"),  # YAML 1.1 reads a bare `on` as true
        ("env:\n  L: [1]\n", r"env\.L must be a string, got list"),
        ("env:\n  N: null\n", r"env\.N must be a string, got NoneType"),
        ("env:\n  '1BAD': x\n", r"env key '1BAD' is not a valid environment variable name"),
        ("env:\n  'A=B': x\n", r"env key 'A=B' is not a valid"),
        ("env:\n  A: \"x\\0y\"\n", r"env\.A contains a NUL character"),
        ("env: [A, B]\n", r"env must be a mapping of NAME: \"value\", got list"),
        ("data: [1, 2]\n", r"data must be a mapping, got list"),
        ("data: {1: x}\n", r"data keys must be strings \(found 1\)"),
        ("- a\n- b\n", r"must be a mapping with `env:` and/or `data:`, got list; refused"),
        ("just text\n", r"got str; refused"),
        ("env: [unclosed\n", r"invalid YAML at line"),
        ("a: &a [*a]\n", r"refers to itself"),
    ],
)
def test_bad_content_refused_with_one_clear_message(text, message):
    with pytest.raises(HookOutputsError, match=message) as info:
        parse(text)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith("/ws/.hook-outputs.yaml: ")


def test_yaml_bomb_refused():
    with pytest.raises(HookOutputsError, match="expands to more than 20000 nodes"):
        parse(BILLION_LAUGHS)


def test_huge_file_refused():
    with pytest.raises(HookOutputsError, match=f"larger than {MAX_OUTPUT_BYTES} bytes; refused"):
        parse_hook_outputs(b"data: {x: '" + b"y" * MAX_OUTPUT_BYTES + b"'}\n", source="f.yaml", is_json=False)


@pytest.mark.parametrize("raw", [b"\xff\xfe\x00\x01binary", b"env: {A: \"\xc3\x28\"}\n"])
def test_binary_refused(raw):
    with pytest.raises(HookOutputsError, match=r"not UTF-8 text \(byte \d+\); refused"):
        parse_hook_outputs(raw, source="f.yaml", is_json=False)


def test_control_characters_refused():
    with pytest.raises(HookOutputsError, match="invalid YAML"):
        parse_hook_outputs(b"env: {A: b}\n\x00\x01\x02", source="f.yaml", is_json=False)


def test_bad_json_refused():
    with pytest.raises(HookOutputsError, match="invalid JSON at line 1"):
        parse('{"env": ', source="/ws/.hook-outputs.json")
    with pytest.raises(HookOutputsError, match="JSON nested too deeply"):
        parse("[" * 100_000 + "]" * 100_000, source="/ws/.hook-outputs.json")


# ---- read then delete ---------------------------------------------------------------


def test_take_reads_then_deletes(tmp_path):
    (tmp_path / ".hook-outputs.yaml").write_text("env: {A: b}\ndata: {n: 1}\n")
    found = take_hook_outputs(tmp_path)
    assert found is not None and found.outputs == HookOutputs(env={"A": "b"}, data={"n": 1})
    assert found.source == f"{tmp_path}/.hook-outputs.yaml"
    assert not (tmp_path / ".hook-outputs.yaml").exists()
    assert take_hook_outputs(tmp_path) is None


def test_take_json(tmp_path):
    (tmp_path / ".hook-outputs.json").write_text('{"env": {"A": "b"}}')
    found = take_hook_outputs(tmp_path)
    assert found is not None and found.outputs.env == {"A": "b"}
    assert not (tmp_path / ".hook-outputs.json").exists()


def test_refused_file_is_deleted_too(tmp_path):
    (tmp_path / ".hook-outputs.yaml").write_text("env: {PORT: 1}\n")
    with pytest.raises(HookOutputsError, match="env.PORT must be a string"):
        take_hook_outputs(tmp_path)
    assert not (tmp_path / ".hook-outputs.yaml").exists()


def test_both_names_are_ambiguous_and_both_deleted(tmp_path):
    (tmp_path / ".hook-outputs.yaml").write_text("env: {A: b}\n")
    (tmp_path / ".hook-outputs.json").write_text('{"env": {"A": "c"}}')
    with pytest.raises(HookOutputsError, match="both .hook-outputs.yaml and .hook-outputs.json exist"):
        take_hook_outputs(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_symlink_is_never_followed(tmp_path):
    secret = tmp_path / "secret.yaml"
    secret.write_text("env: {SECRET: answer-key}\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".hook-outputs.yaml").symlink_to(secret)
    with pytest.raises(HookOutputsError, match="is a symbolic link; refused") as info:
        take_hook_outputs(ws)
    assert "answer-key" not in str(info.value)
    assert not os.path.lexists(ws / ".hook-outputs.yaml")
    assert secret.read_text() == "env: {SECRET: answer-key}\n"  # the target is left alone


def test_dangling_symlink_refused_and_removed(tmp_path):
    (tmp_path / ".hook-outputs.yaml").symlink_to(tmp_path / "nowhere")
    with pytest.raises(HookOutputsError, match="symbolic link"):
        take_hook_outputs(tmp_path)
    assert not os.path.lexists(tmp_path / ".hook-outputs.yaml")


def test_fifo_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / ".hook-outputs.yaml")
    with pytest.raises(HookOutputsError, match="is not a regular file; refused"):
        take_hook_outputs(tmp_path)
    assert not os.path.lexists(tmp_path / ".hook-outputs.yaml")


def test_directory_refused_and_removed(tmp_path):
    (tmp_path / ".hook-outputs.yaml").mkdir()
    (tmp_path / ".hook-outputs.yaml" / "inner").write_text("x")
    with pytest.raises(HookOutputsError, match="is a directory, not a regular file; refused"):
        take_hook_outputs(tmp_path)
    assert not (tmp_path / ".hook-outputs.yaml").exists()


def test_huge_file_on_disk_refused_without_reading_it_all(tmp_path):
    path = tmp_path / ".hook-outputs.yaml"
    with open(path, "wb") as handle:
        handle.truncate(50 * MAX_OUTPUT_BYTES)  # sparse: big on paper, cheap on disk
    with pytest.raises(HookOutputsError, match="larger than"):
        take_hook_outputs(tmp_path)
    assert not path.exists()


# ---- merging and the run directory ---------------------------------------------------


def test_merged_later_wins_per_top_level_key():
    first = HookOutputs(env={"A": "1", "B": "1"}, data={"x": {"deep": 1}, "y": 1})
    later = HookOutputs(env={"B": "2"}, data={"x": {"other": 2}})
    assert first.merged(later) == HookOutputs(env={"A": "1", "B": "2"}, data={"x": {"other": 2}, "y": 1})


def test_combine_outputs():
    assert combine_outputs([]) is None
    a = parse("env: {A: '1'}\nzz: 1\n", source="one")
    b = parse("env: {A: '2', B: '2'}\n", source="two")
    combined = combine_outputs([a, b])
    assert combined is not None
    assert combined.outputs.env == {"A": "2", "B": "2"}
    assert combined.source == "one, two"
    assert len(combined.warnings) == 1


def test_outputs_data_is_written_as_yaml(tmp_path):
    path = write_hook_outputs(tmp_path / "run" / "hook_outputs.yaml",
                              {"before_all": {"server": "up"}, "cases": {"c1": {"n": 2}}})
    assert yaml.safe_load(path.read_text()) == {"before_all": {"server": "up"}, "cases": {"c1": {"n": 2}}}
