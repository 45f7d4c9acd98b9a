"""The judge worker's request handling, in-process (the subprocess side is in tests/integration/judges)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_eval_sandbox.judges._worker import handle
from agent_eval_sandbox.judges.registry import find_builtin


def _run(judge: dict[str, Any], outputs: dict[str, Any] | None = None, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    line = json.dumps({"id": 1, "judge": judge, "arguments": arguments or {}, "outputs": outputs or {}}).encode()
    return handle(line, {})


def _check(source: str, **kw: Any) -> dict[str, Any]:
    return _run({"kind": "check", "name": "c", "source": source}, **kw)


def test_a_check_receives_outputs_and_arguments() -> None:
    reply = _check("n = len(outputs['text'])\nreturn n >= arguments['min'], f'{n} chars'", outputs={"text": "abcd"}, arguments={"min": 3})
    assert reply == {"id": 1, "ok": True, "value": True, "rationale": "4 chars"}


def test_bare_values_and_non_string_rationales_are_accepted() -> None:
    assert _check("return 3")["value"] == 3
    assert _check("return [True, 42]") == {"id": 1, "ok": True, "value": True, "rationale": "42"}


def test_a_raising_check_names_the_exception_and_its_line() -> None:
    reply = _check("x = 1\nraise ValueError('boom')")
    assert reply == {"id": 1, "ok": False, "error": "ValueError: boom (check line 2)"}


def test_wrong_shapes_and_unserialisable_values_are_errors() -> None:
    assert "returned a str" in _check("return 'yes'")["error"]
    assert "returned a tuple" in _check("return (1, 2, 3)")["error"]
    reply = _check("return {1, 2}, 'set'")
    assert reply["ok"] is False and "not JSON-serialisable: set" in reply["error"]
    assert "not JSON-serialisable" in _check("x = []\nx.append(x)\nreturn x, 'loop'")["error"]


def test_sys_exit_and_syntax_errors_are_reported() -> None:
    assert _check("import sys\nsys.exit(4)")["error"] == "the judge called sys.exit(4)"
    assert _check("return (")["error"].startswith("the check snippet has a syntax error at line 1")


def test_module_judges_import_with_keyword_outputs(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "myjudges").mkdir()
    (tmp_path / "myjudges/__init__.py").write_text("")
    (tmp_path / "myjudges/checks.py").write_text("def score(outputs, threshold=0):\n    return outputs['n'] > threshold, 'ok'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    judge = {"kind": "module", "module": "myjudges.checks", "function": "score"}
    assert _run(judge, outputs={"n": 5}, arguments={"threshold": 3})["value"] is True
    assert "cannot import module 'nope_mod'" in _run({"kind": "module", "module": "nope_mod", "function": "f"})["error"]
    assert "has no callable 'missing'" in _run({**judge, "function": "missing"})["error"]


def test_builtin_files_load_by_path() -> None:
    entry = find_builtin("cost_budget")
    assert entry is not None
    reply = _run({"kind": "file", "path": str(entry.path), "function": "judge"}, outputs={"cost_usd": 0.3}, arguments={"max_cost_usd": 0.5})
    assert reply["ok"] and reply["value"] is True


def test_a_module_failing_at_import_is_a_load_error(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("raise RuntimeError('no db')\ndef judge(o): pass\n")
    reply = _run({"kind": "file", "path": str(tmp_path / "bad.py"), "function": "judge"})
    assert reply["error"].startswith("loading the judge failed: RuntimeError: no db (bad.py line 1)")


def test_a_builtin_with_nothing_to_judge_answers_so_and_never_a_pass() -> None:
    entry = find_builtin("tool_call_validation")
    assert entry is not None
    reply = _run({"kind": "file", "path": str(entry.path), "function": "judge"}, outputs={"tool_calls": []})
    assert reply == {"id": 1, "ok": False, "error": "nothing to judge: the case made no tool calls to validate"}


def test_judge_code_may_say_it_has_nothing_to_judge() -> None:
    reply = _check("from agent_eval_sandbox.judges.nothing import NothingToJudge\nraise NothingToJudge('no report')")
    assert reply == {"id": 1, "ok": False, "error": "nothing to judge: no report"}
