from __future__ import annotations

import pytest

from agent_eval_sandbox.config.yaml_reader import (
    DuplicateKey,
    YamlReadError,
    find_duplicate_keys,
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


def _duplicates(tmp_path, text, name="f.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return find_duplicate_keys(path)


def test_a_key_written_twice_is_found_with_both_lines(tmp_path):
    found = _duplicates(tmp_path, "name: a\nexecution:\n  skill: s\n  timeout: 5\n  timeout: 50\nname: b\n")
    assert found == [DuplicateKey("timeout", "execution", 5, 4), DuplicateKey("name", "", 6, 1)]
    assert found[0].describe() == "key 'execution.timeout' is written twice (lines 4 and 5); only the last value counts"
    # what PyYAML itself makes of it: the last one, silently
    assert read_yaml_file(tmp_path / "f.yaml")["execution"]["timeout"] == 50


def test_duplicates_inside_lists_name_the_item(tmp_path):
    found = _duplicates(tmp_path, "judges:\n  - name: a\n    check: x\n  - name: b\n    check: y\n    check: z\n")
    assert [(d.key, d.where, d.line) for d in found] == [("check", "judges[1]", 6)]


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: 2\n",
        "a: {x: 1}\nb: {x: 1}\n",  # the same key in two mappings
        "base: &b {x: 1}\nuse:\n  <<: *b\n  x: 2\n",  # a merge key overridden on purpose
        "1: a\n'1': b\n",  # an int and a string are two keys to YAML
        "",
        "[unclosed\n",  # malformed: the reader reports it, the lint has nothing to add
    ],
)
def test_no_false_duplicates(tmp_path, text):
    assert _duplicates(tmp_path, text) == []


def test_shared_aliases_are_walked_once(tmp_path):
    # A mapping with a duplicate, aliased 10^6 times: reported once, found without expanding.
    lines = ["l0: &l0 {k: 1, k: 2}"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 7)]
    found = _duplicates(tmp_path, "\n".join(lines) + "\n")
    assert [(d.key, d.where) for d in found] == [("k", "l0")]


def test_json_duplicates(tmp_path):
    found = _duplicates(tmp_path, '{"a": 1, "b": {"c": 1, "c": 2}}', name="input.json")
    assert [d.key for d in found] == ["c"] and "written twice;" in found[0].describe()
