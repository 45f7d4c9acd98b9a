"""The OS-level deny filter: which workspace paths never enter the container."""

from __future__ import annotations

import pytest

from agent_eval_sandbox.config.models import EvalConfig
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.interception.paths import (
    PathDenyFilter,
    compile_deny_pattern,
    deny_filter,
)


def filter_of(*patterns: str) -> PathDenyFilter:
    compiled = (compile_deny_pattern(p, "test") for p in patterns)
    return PathDenyFilter(tuple(p for p in compiled if p is not None))


@pytest.mark.parametrize(
    ("pattern", "denied", "kept"),
    [
        # A directory pattern: the directory and everything below it, at any depth.
        ("eval/", ["eval/", "eval/answers.yaml", "eval/a/b/c.txt", "sub/eval/x"], ["eval", "evaluation/x", "x/eval"]),
        # Anchored to the workspace root.
        ("/eval/", ["eval/", "eval/x"], ["sub/eval/x", "sub/eval/"]),
        ("./eval/", ["eval/x"], ["sub/eval/x"]),
        # A plain name: a file or a directory of that name, anywhere.
        ("answers.yaml", ["answers.yaml", "cases/c1/answers.yaml", "answers.yaml/", "answers.yaml/x"], ["answers.yml", "x/answers.yaml.bak"]),
        # A slash inside anchors.
        ("eval/answers.yaml", ["eval/answers.yaml"], ["x/eval/answers.yaml", "answers.yaml"]),
        # Globs: * and ? stay within a segment.
        ("*.secret", ["a.secret", "dir/b.secret"], ["a.secret.txt"]),
        ("data/*.csv", ["data/a.csv", "data/a.csv/inner"], ["data/x/a.csv", "a.csv"]),
        ("key?.pem", ["key1.pem", "d/keyA.pem"], ["key10.pem"]),
        ("[ab].txt", ["a.txt", "b.txt"], ["c.txt"]),
        ("[!ab].txt", ["c.txt"], ["a.txt"]),
        # ** spans segments.
        ("eval/**", ["eval/x", "eval/a/b"], ["eval", "x/eval/y"]),
        ("**/gold/*.json", ["gold/a.json", "x/y/gold/b.json"], ["gold/x/a.json"]),
        ("docs/**/draft.md", ["docs/draft.md", "docs/a/b/draft.md"], ["draft.md"]),
        # Regex metacharacters are literal.
        ("a+b(c).txt", ["a+b(c).txt"], ["aab(c).txt"]),
    ],
)
def test_gitignore_like_patterns(pattern, denied, kept):
    is_denied = filter_of(pattern)
    for path in denied:
        assert is_denied(path), (pattern, path)
    for path in kept:
        assert not is_denied(path), (pattern, path)


def test_a_trailing_slash_pattern_matches_directories_only():
    is_denied = filter_of("secrets/")
    assert is_denied("secrets/")  # asked as a directory
    assert not is_denied("secrets")  # a file named secrets
    assert is_denied("secrets/token")  # inside the directory


def test_paths_are_normalised():
    is_denied = filter_of("/eval/")
    assert is_denied("./eval/x") and is_denied("eval//x")
    assert not is_denied("") and not is_denied(".")


def test_patterns_outside_the_workspace_are_ignored():
    assert compile_deny_pattern("//etc/passwd", "f") is None
    assert compile_deny_pattern("~/.ssh/", "f") is None


@pytest.mark.parametrize(("pattern", "problem"), [("!keep.txt", "negation"), ("/", "names no path"), ("  ", "names no path")])
def test_unusable_patterns_are_config_errors(pattern, problem):
    with pytest.raises(ConfigError, match=problem) as info:
        compile_deny_pattern(pattern, "sandbox.filesystem.denyRead[0]")
    assert "sandbox.filesystem.denyRead[0]" in str(info.value)


def test_the_config_filter_collects_every_denied_path():
    config = EvalConfig.model_validate(
        {
            "permissions": {
                "deny": [
                    "mcp__*",
                    {"path": "eval/", "tools": ["Read", "Bash"]},
                    {"path": "reference.md", "tools": ["Write"]},  # any path rule, whatever its tools
                    "Read(gold/**)",
                    "Grep(notes/*.txt)",
                    "Edit(src/**)",  # denying edits does not hide a path
                    "Bash(cat *)",
                ],
                "allow": [{"path": "artifacts/", "tools": ["Write"]}],
            },
            "sandbox": {"filesystem": {"denyRead": ["answers.yaml", "tool_handlers.yaml"]}},
        }
    )
    is_denied = deny_filter(config)
    assert [p.field for p in is_denied.patterns] == [
        "permissions.deny[1].path",
        "permissions.deny[2].path",
        "permissions.deny[3]",
        "permissions.deny[4]",
        "sandbox.filesystem.denyRead[0]",
        "sandbox.filesystem.denyRead[1]",
    ]
    for path in ("eval/answers.yaml", "reference.md", "gold/a/b.json", "notes/n.txt", "cases/c/answers.yaml", "tool_handlers.yaml"):
        assert is_denied(path), path
    for path in ("src/main.py", "artifacts/out.md", "notes/n.md", "README.md"):
        assert not is_denied(path), path
    assert bool(is_denied)


def test_no_deny_rules_deny_nothing():
    is_denied = deny_filter(EvalConfig())
    assert not is_denied and not is_denied("anything/at/all")
