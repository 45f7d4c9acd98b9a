"""The python builtin judges' rules (called directly; in a run they execute in the worker)."""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import pytest

from agent_eval_sandbox.judges.nothing import NothingToJudge
from agent_eval_sandbox.judges.registry import find_builtin
from tests.unit.judges.rundir_fixture import assistant, tool


def _load(name: str) -> ModuleType:
    entry = find_builtin(name)
    assert entry is not None
    spec = importlib.util.spec_from_file_location(f"builtin_{name}", entry.path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cost_budget = _load("cost_budget").judge
tool_call_validation = _load("tool_call_validation").judge
consulted_docs = _load("consulted_docs").judge


class TestCostBudget:
    def test_within_at_and_over_budget(self) -> None:
        assert cost_budget({"cost_usd": 0.4})[0] is True  # default budget 1.0
        assert cost_budget({"cost_usd": 0.25}, max_cost_usd=0.25)[0] is True
        passed, rationale = cost_budget({"cost_usd": 0.3}, max_cost_usd=0.25)
        assert passed is False and "exceeds" in rationale

    @pytest.mark.parametrize("outputs", [{}, {"cost_usd": None}, {"cost_usd": "0.1"}, {"cost_usd": float("nan")}])
    def test_missing_cost_is_nothing_to_judge_not_a_pass(self, outputs: dict[str, Any]) -> None:
        with pytest.raises(NothingToJudge, match="no cost was recorded"):
            cost_budget(outputs)

    def test_a_case_stopped_by_its_budget_fails_however_little_it_spent(self) -> None:
        """`--max-budget 0`: every request refused, $0 spent — that is not within budget, it is the budget."""
        passed, rationale = cost_budget({"cost_usd": 0.0, "end_reason": "budget_exhausted"})
        assert passed is False and "stopped by its budget" in rationale


class TestToolCallValidation:
    @pytest.mark.parametrize("outputs", [{"tool_calls": []}, {}])
    def test_no_calls_is_nothing_to_judge_not_a_pass(self, outputs: dict[str, Any]) -> None:
        with pytest.raises(NothingToJudge, match="no tool calls"):
            tool_call_validation(outputs)

    def test_error_flags_dicts_and_error_text_fail(self) -> None:
        ok = {"name": "Read", "result": "file contents", "is_error": False}
        assert tool_call_validation({"tool_calls": [ok]})[0] is True
        for bad in ({"name": "Bash", "is_error": True}, {"name": "X", "result": {"error": "denied"}},
                    {"name": "Y", "output": "Error: not found"}, {"name": "Z", "result": "ERROR 500 from server"}):
            passed, rationale = tool_call_validation({"tool_calls": [ok, bad]})
            assert passed is False and rationale.startswith("1 of 2 tool calls failed")

    def test_error_later_in_the_text_does_not_count(self) -> None:
        late = {"name": "Read", "result": "x" * 60 + " error handling section"}
        assert tool_call_validation({"tool_calls": [late]})[0] is True


class TestConsultedDocs:
    EVENTS = [assistant("", [tool("Read", "1", file_path="/home/u/project/docs/setup.md"),
                             tool("Grep", "2", pattern="x", path="/home/u/project/src/api.py")]),
              assistant("", [tool("Read", "3", file_path="/p/guide/intro.md")], parent="9")]

    def _outputs(self, expected: list[str]) -> dict[str, Any]:
        return {"events": self.EVENTS, "annotations": {"expected_files": expected}}

    def test_nothing_expected_is_nothing_to_judge_not_a_pass(self) -> None:
        with pytest.raises(NothingToJudge, match="no expected_files"):
            consulted_docs({"annotations": {}, "events": []})

    def test_suffix_matching_uses_whole_components(self) -> None:
        assert consulted_docs(self._outputs(["docs/setup.md", "src/api.py"]), min_coverage=1.0)[0] is True
        passed, rationale = consulted_docs(self._outputs(["report.md", "setup.md"]), min_coverage=1.0)
        assert passed is False and "not read: report.md" in rationale
        assert consulted_docs(self._outputs(["tup.md"]))[0] is False

    def test_coverage_threshold_and_options(self) -> None:
        outputs = self._outputs(["docs/setup.md", "guide/intro.md", "missing.md"])
        assert consulted_docs(outputs, min_coverage=0.6)[0] is True
        assert consulted_docs(outputs, min_coverage=0.6, include_subagents=False)[0] is False
        assert consulted_docs(self._outputs(["src/api.py"]), include_grep=False)[0] is False
        assert consulted_docs(self._outputs(["CLAUDE.md"]), preloaded_files=["CLAUDE.md"])[0] is True
        assert consulted_docs(self._outputs(["setup.md"]), match="exact")[0] is False
        assert consulted_docs(self._outputs(["/home/u/project/docs/setup.md"]), match="exact")[0] is True
        assert consulted_docs(self._outputs(["other/setup.md"]), match="basename")[0] is True

    def test_a_bad_match_option_raises(self) -> None:
        with pytest.raises(ValueError, match="match must be one of"):
            consulted_docs(self._outputs(["a"]), match="fuzzy")
