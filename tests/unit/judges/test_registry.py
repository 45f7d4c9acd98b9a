"""The builtin judge catalog: discovery, resolution, and the load-time error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.judges.registry import (
    BuiltinRegistryError,
    available_builtins,
    find_builtin,
    scan_builtins,
    unknown_builtin_message,
)


def test_the_shipped_catalog() -> None:
    names = {e.qualified_name: e.kind for e in available_builtins()}
    assert names == {
        "efficiency/cost_budget": "python",
        "process/consulted_docs": "python",
        "process/tool_call_validation": "python",
        "quality/output_completeness": "llm",
        "safety/no_harmful_content": "llm",
    }


def test_bare_and_qualified_names_resolve() -> None:
    assert find_builtin("cost_budget").category == "efficiency"
    assert find_builtin("efficiency/cost_budget").name == "cost_budget"
    assert find_builtin("process/cost_budget") is None
    assert find_builtin("cost_budgt") is None


def test_unknown_names_list_every_available_judge() -> None:
    message = unknown_builtin_message("cost_budgt")
    assert message.startswith("unknown builtin judge 'cost_budgt'. Available: efficiency/cost_budget, process/consulted_docs")
    mismatch = unknown_builtin_message("process/cost_budget")
    assert "'cost_budget' is in category 'efficiency', not 'process'" in mismatch


def _catalog(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_discovery_rules(tmp_path: Path) -> None:
    root = _catalog(tmp_path, {
        "a/one.py": "def judge(outputs, **kw):\n    return True, ''\n",
        "a/_private.py": "x = 1\n",
        "a/__init__.py": "",
        "a/notes.txt": "ignored",
        "b/two.md": "Is it good? {{ conversation }}",
        "_hidden/three.py": "def judge(o): pass\n",
    })
    assert [e.qualified_name for e in scan_builtins(root)] == ["a/one", "b/two"]


def test_collisions_and_missing_judge_functions_are_catalog_errors(tmp_path: Path) -> None:
    with pytest.raises(BuiltinRegistryError, match="collision: 'one' is in both a/ and b/"):
        scan_builtins(_catalog(tmp_path / "x", {"a/one.py": "def judge(o): pass\n", "b/one.md": "p"}))
    with pytest.raises(BuiltinRegistryError, match="must define a function 'judge'"):
        scan_builtins(_catalog(tmp_path / "y", {"a/one.py": "def other(o): pass\n"}))
