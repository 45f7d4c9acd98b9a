"""Never-ran is never a pass: the standing of a case, the statistics, the gates, the run's exit code and
what the terminal prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.config.models import ThresholdConfig
from agent_eval_sandbox.judges.aggregate import aggregate
from agent_eval_sandbox.judges.results import CaseResult, JudgeMeta
from agent_eval_sandbox.judges.standing import not_run_reason, standing
from agent_eval_sandbox.report.build import verdict_exit_code
from agent_eval_sandbox.report.summary import Summary, count_cases, summarize
from agent_eval_sandbox.report.text import failure_lines, metric_text, not_completed_lines, text_lines
from agent_eval_sandbox.rundir.models import CaseOutcome

RAN = {"agent_duration_s": 3.0, "duration_s": 4.5}


def _outcome(end_reason: str, *, ran: bool = True, **fields: object) -> CaseOutcome:
    return CaseOutcome.model_validate({"case_id": "c", "end_reason": end_reason, **(RAN if ran else {}), **fields})


@pytest.mark.parametrize(("outcome", "expected"), [
    (None, "not_run"),
    (_outcome("error", ran=False, error="creating sandbox failed"), "not_run"),
    (_outcome("hook_failed", ran=False), "not_run"),
    (_outcome("infra_error", ran=False), "not_run"),
    (_outcome("infra_error"), "not_run"),  # ran, but the tool failed around it: nothing of it is judged
    (_outcome("interrupted"), "not_run"),  # killed by Ctrl-C mid-way: never a PASS badge
    (_outcome("interrupted", ran=False), "not_run"),
    (_outcome("timed_out"), "incomplete"),
    (_outcome("budget_exhausted"), "incomplete"),
    (_outcome("signaled"), "incomplete"),
    (_outcome("oom_killed"), "incomplete"),
    (_outcome("error"), "incomplete"),  # the agent ran, then copy-out failed: judged on what is there
    (_outcome("exited", exit_code=1), "completed"),
    (_outcome("exited", ran=False), "completed"),  # a record without agent_duration_s: exited says it ran
])
def test_the_standing_of_a_case(outcome: CaseOutcome | None, expected: str) -> None:
    assert standing(outcome) == expected


def test_the_not_run_reason_names_the_end_reason_and_the_error() -> None:
    reason = not_run_reason(_outcome("infra_error", ran=False, error="the sandbox could not be started:\nboom"))
    assert reason == ("infra_error", "not judged: the case did not run (end_reason: infra_error): "
                                     "the sandbox could not be started: boom")
    assert not_run_reason(None)[0] == "error"


def _not_run(judge_type: str = "check") -> CaseResult:
    return CaseResult.not_run(judge_type, "error", "not judged: the case did not run (end_reason: error)")


class TestStatistics:
    def test_a_never_ran_case_counts_as_a_failed_verdict(self) -> None:
        stats = aggregate("check", [CaseResult.scored("check", True, ""), _not_run()])
        assert stats.pass_rate == stats.mean == 0.5
        assert (stats.scored_cases, stats.not_run_cases, stats.total_cases) == (1, 1, 2)
        assert stats.error_rate == 0.5

    def test_a_never_ran_case_counts_as_the_bottom_of_the_scale_in_a_mean(self) -> None:
        results = [CaseResult.scored("llm", 5, ""), _not_run("llm")]
        assert aggregate("llm", results, score_range=(1.0, 5.0)).mean == 3.0
        assert aggregate("code", results).mean == 2.5  # no declared scale: 0

    def test_a_judge_whose_cases_all_never_ran_has_no_metric(self) -> None:
        stats = aggregate("check", [_not_run(), _not_run()])
        assert stats.pass_rate is None and stats.mean is None and stats.status == "ERROR"
        assert stats.error_rate == 1.0

    def test_judge_errors_and_skips_stay_out_of_the_pass_rate(self) -> None:
        results = [CaseResult.scored("check", True, ""), CaseResult.errored("check", "nothing to judge: x"),
                   CaseResult.skipped("check", "Skipped: condition")]
        assert aggregate("check", results).pass_rate == 1.0

    def test_incomplete_results_are_counted_as_such(self) -> None:
        stats = aggregate("check", [CaseResult.scored("check", True, "").marked_incomplete("timed_out")])
        assert stats.incomplete_cases == 1 and stats.pass_rate == 1.0


def _summary(per_case: dict[str, dict[str, CaseResult]], thresholds: dict[str, ThresholdConfig],
             outcomes: dict[str, CaseOutcome | None] | None = None, *, judges: list[JudgeMeta] | None = None,
             planned: int = 0, offline: bool = False) -> Summary:
    return summarize(
        run_id="r", eval_name="demo", title="t", config_path=None, scored_at="now",
        judges=judges or [JudgeMeta("ok", "check")], per_case=per_case, thresholds=thresholds, run_metrics=None,
        cases=count_cases(outcomes, planned=planned) if outcomes is not None else None, offline=offline,
        cost_usd=0.25,
    )


ALL_GATES = ThresholdConfig(min_pass_rate=0.0, min_mean=0.0, max_error_rate=1.0)


def test_an_all_errored_run_fails_every_gate_however_lenient() -> None:
    per_case = {c: {"ok": _not_run()} for c in ("a", "b")}
    outcomes = {c: _outcome("error", ran=False, error="no space") for c in ("a", "b")}
    summary = _summary(per_case, {"ok": ALL_GATES}, outcomes)
    assert [c.passed for c in summary.thresholds.checks] == [False, False, False]
    assert all("no case was judged: 2 of 2 never ran" in c.detail for c in summary.thresholds.checks)
    assert verdict_exit_code(summary) == 1


def test_a_numeric_judge_whose_cases_never_ran_fails_its_min_mean() -> None:
    judges = [JudgeMeta("q", "llm", (1.0, 5.0))]
    per_case = {"a": {"q": _not_run("llm")}}
    summary = _summary(per_case, {"q": ThresholdConfig(min_mean=1.0)}, {"a": None}, judges=judges)
    assert summary.thresholds.checks[0].passed is False and summary.thresholds.checks[0].actual is None


def test_one_never_ran_case_pulls_the_pass_rate_below_a_full_gate() -> None:
    per_case = {"a": {"ok": CaseResult.scored("check", True, "")}, "b": {"ok": _not_run()}}
    summary = _summary(per_case, {"ok": ThresholdConfig(min_pass_rate=1.0)},
                       {"a": _outcome("exited", exit_code=0), "b": _outcome("hook_failed", ran=False)})
    assert summary.judges["ok"].pass_rate == 0.5 and verdict_exit_code(summary) == 1


class TestRunExitCode:
    def test_infra_errors_exit_4_not_0_and_not_1(self) -> None:
        per_case = {"a": {"ok": CaseResult.scored("check", True, "")}, "b": {"ok": _not_run()}}
        outcomes = {"a": _outcome("exited", exit_code=0), "b": _outcome("infra_error", ran=False)}
        assert verdict_exit_code(_summary(per_case, {}, outcomes)) == 4
        assert verdict_exit_code(_summary(per_case, {"ok": ThresholdConfig(min_pass_rate=1.0)}, outcomes)) == 4

    def test_a_run_where_no_case_completed_fails_without_any_threshold(self) -> None:
        per_case = {"a": {"ok": CaseResult.scored("check", True, "").marked_incomplete("budget_exhausted")}}
        summary = _summary(per_case, {}, {"a": _outcome("budget_exhausted")})
        assert summary.cases is not None and summary.cases.nothing_completed
        assert verdict_exit_code(summary) == 1

    def test_a_completed_run_meeting_its_gates_exits_0(self) -> None:
        per_case = {"a": {"ok": CaseResult.scored("check", True, "")}}
        summary = _summary(per_case, {"ok": ThresholdConfig(min_pass_rate=1.0)}, {"a": _outcome("exited", exit_code=1)})
        assert verdict_exit_code(summary) == 0

    def test_planned_cases_without_an_outcome_still_count(self) -> None:
        cases = count_cases({"a": _outcome("exited")}, planned=3, interrupted=True)
        assert (cases.planned, cases.ran, cases.completed, cases.interrupted) == (3, 1, 1, True)


class TestTerminal:
    PER_CASE = {
        "good": {"ok": CaseResult.scored("check", True, "fine"), "q": CaseResult.scored("llm", 4, "good")},
        "bad": {"ok": CaseResult.scored("check", False, "expected 'Hello'\nbut found nothing"),
                "q": CaseResult.scored("llm", 2, "weak").marked_incomplete("timed_out")},
        "gone": {"ok": _not_run(), "q": _not_run("llm")},
    }
    OUTCOMES = {"good": _outcome("exited", exit_code=0), "bad": _outcome("timed_out", exit_code=-1, duration_s=120.0,
                                                                          error="timed out after 120s"),
                "gone": _outcome("infra_error", ran=False, error="the sandbox could not be started (3 attempts): x")}

    def _summary(self) -> Summary:
        return _summary(self.PER_CASE, {"ok": ThresholdConfig(min_pass_rate=1.0), "q": ThresholdConfig(min_mean=3.0)},
                        self.OUTCOMES, judges=[JudgeMeta("ok", "check"), JudgeMeta("q", "llm", (1.0, 5.0))],
                        offline=True)

    def test_the_failing_case_judge_pairs_are_listed_with_their_rationale_on_one_line(self) -> None:
        assert failure_lines(self._summary()) == [
            "FAILURES: 2 (case × judge)",
            "  bad × ok: FAIL — expected 'Hello' but found nothing",
            "  bad × q (incomplete: timed_out): score 2 below min_mean 3.0 — weak",
        ]

    def test_cases_that_did_not_complete_are_listed_with_their_end_reason_and_error(self) -> None:
        assert not_completed_lines(self._summary()) == [
            "NOT COMPLETED: 2 of 3 cases",
            "  bad: timed_out after 120.0s (exit -1) — timed out after 120s",
            "  gone: infra_error, never ran — the sandbox could not be started (3 attempts): x",
        ]

    def test_pass_rates_are_printed_one_way_with_their_denominator(self) -> None:
        stats = self._summary().judges["ok"]
        assert metric_text(stats) == "pass_rate=33.3% (1 of 3 cases passed; 2 scored, 0 errored, 0 skipped, 1 never ran)"

    def test_the_whole_text_ends_with_the_run_directory_and_the_verdict(self) -> None:
        lines = text_lines(self._summary(), Path("/runs/demo/r"), Path("/runs/demo/r/report.html"))
        assert lines[0] == "demo: 3 planned cases (2 ran, 1 completed), 2 judges (run r)"
        assert "  cost: $0.2500 (scripted: offline run, priced from the scripts' usage; no model was billed)" in lines
        tail = lines[lines.index("run directory: /runs/demo/r"):]
        assert tail[:3] == ["run directory: /runs/demo/r", "  report: /runs/demo/r/report.html",
                            "INFRASTRUCTURE ERRORS: 1 case(s) failed in the tool's own plumbing, not the skill "
                            "(exit 4): re-run them"]
        assert tail[3].startswith("REGRESSIONS: 2 detected")
        assert lines.index("FAILURES: 2 (case × judge)") < lines.index("NOT COMPLETED: 2 of 3 cases") < lines.index(
            "run directory: /runs/demo/r")
