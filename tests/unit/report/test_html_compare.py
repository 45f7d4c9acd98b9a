"""report.html's comparison and reward sections: what they show, escaped, and absent without data."""

from __future__ import annotations

from agent_eval_sandbox.compare.deltas import RunResults, compare_results
from agent_eval_sandbox.compare.models import PairwiseCase, PairwiseSummary, RunRef
from agent_eval_sandbox.config.models import RewardConfig, ThresholdConfig
from agent_eval_sandbox.judges.aggregate import aggregate
from agent_eval_sandbox.judges.results import CaseResult
from agent_eval_sandbox.report.html_compare import comparison_section, reward_section
from agent_eval_sandbox.report.summary import with_pairwise, with_reward
from tests.unit.report.summary_fixture import HOSTILE_CASE, SCRIPT, make_summary


def _comparison():
    def run(run_id: str, verdicts: list[bool]) -> RunResults:
        per_case = {HOSTILE_CASE if i == 0 else f"c{i}": {"correct": CaseResult.scored("check", v, "")}
                    for i, v in enumerate(verdicts)}
        judges = {"correct": aggregate("check", [r["correct"] for r in per_case.values()])}
        return RunResults(ref=RunRef(run_id=run_id, root=f"/runs/{SCRIPT}"), judges=judges, per_case=per_case)

    found = compare_results(run("new", [False, False, True]), run(SCRIPT, [True, True, True]))
    found.pairwise = PairwiseSummary(run_a="new", run_b=SCRIPT, cases_compared=1, ties=1, win_rate=0.0, per_case=[
        PairwiseCase(case_id=HOSTILE_CASE, winner="tie", pref_ab="A", pref_ba="A", reasoning=f"both {SCRIPT}")])
    return found


def test_the_comparison_section_shows_the_regression_escaped():
    html = comparison_section(_comparison(), {HOSTILE_CASE: "case-1"})
    assert "Regressed against the baseline: correct" in html
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert 'href="#case-1"' in html and "case-&quot;2&quot;&lt;b&gt;" in html
    assert "−2" in html and "regressed" in html and "p</th>" in html
    assert "Pairwise judge" in html and "A / A" in html


def test_no_comparison_no_section():
    assert comparison_section(None, {}) == ""
    assert reward_section(make_summary(), {}) == ""


def test_the_reward_section_lists_each_case_escaped():
    summary = with_reward(make_summary(), RewardConfig.model_validate({"judge": "correct"}), never_ran={"case-3"})
    html = reward_section(summary, {})
    assert '<section id="reward">' in html and SCRIPT not in html
    assert "never ran and get 0.0" in html and "reward.json" in html


def test_a_pairwise_win_rate_gate_is_checked_with_the_comparison():
    summary = make_summary({"pairwise": ThresholdConfig(min_win_rate=0.5)})
    gated = with_pairwise(summary, _comparison().pairwise)
    check = next(c for c in gated.thresholds.checks if c.judge == "pairwise")
    assert not gated.thresholds.passed and check.actual == 0.0
