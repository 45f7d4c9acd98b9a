from __future__ import annotations

import pytest

from agent_eval_sandbox.config.yaml_reader import (
    YamlReadError,
    read_yaml_file,
    read_yaml_mapping,
)

BILLION_LAUGHS = """
a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
"""


def test_yaml_bomb_refused(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BILLION_LAUGHS)
    with pytest.raises(YamlReadError, match="expands to more than"):
        read_yaml_file(path)


def test_modest_aliases_allowed(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {x: 1}\none: *b\ntwo: *b\n")
    assert read_yaml_file(path)["two"] == {"x": 1}


def test_recursive_alias_refused(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("a: &a [*a]\n")
    with pytest.raises(YamlReadError, match="refers to itself"):
        read_yaml_file(path)


def test_size_cap(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("x: " + "y" * 2000 + "\n")
    with pytest.raises(YamlReadError, match="larger than 100 bytes"):
        read_yaml_file(path, max_bytes=100)


def test_not_utf8(tmp_path):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"a: \xff\xfe\n")
    with pytest.raises(YamlReadError, match="not UTF-8"):
        read_yaml_file(path)


def test_json_file(tmp_path):
    path = tmp_path / "input.json"
    path.write_text('{"prompt": "hi"}')
    assert read_yaml_mapping(path) == {"prompt": "hi"}


def test_bad_json(tmp_path):
    path = tmp_path / "input.json"
    path.write_text('{"prompt": ')
    with pytest.raises(YamlReadError, match="invalid JSON at line 1"):
        read_yaml_file(path)


def test_non_string_keys_refused(tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text("1: a\n")
    with pytest.raises(YamlReadError, match="keys must be strings"):
        read_yaml_mapping(path)


def test_empty_file_is_empty_mapping(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert read_yaml_mapping(path) == {}


def test_python_tags_not_constructed(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("a: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(YamlReadError, match="invalid YAML"):
        read_yaml_file(path)
