"""How a case ended (runner/ending.py, pure)."""

from __future__ import annotations

from agent_eval_sandbox.rundir.models import GatewayUse
from agent_eval_sandbox.runner.case_values import ChannelUse
from agent_eval_sandbox.runner.collect import gateway_unreachable
from agent_eval_sandbox.runner.ending import GATEWAY_UNREACHABLE, ending
from agent_eval_sandbox.runner.events import StreamSummary
from agent_eval_sandbox.sandbox.base import EndReason, ExecResult


def _result(exit_code: int | None, reason: EndReason = EndReason.EXITED) -> ExecResult:
    return ExecResult(exit_code=exit_code, end_reason=reason, signal=None, duration_s=1.0, oom_kills=0,
                      pids_limit_hit=False, stdout=None, stderr=None)


SUCCESS = {"type": "result", "subtype": "success", "is_error": False, "result": "done", "num_turns": 2}


def _ending(result: ExecResult | None, *, error: str | None = None, hook_failed: bool = False,
            cli_result: dict[str, object] | None = SUCCESS):
    return ending(result, StreamSummary(result=cli_result), refused=0, hook_failed=hook_failed, error=error,
                  background_killed=False, timeout_s=30, budget_usd=1.0)


def test_an_agent_that_exited_ends_exited():
    end = _ending(_result(0))
    assert (end.end_reason, end.exit_code, end.notes) == ("exited", 0, ())


def test_a_cli_that_exits_0_on_an_interrupted_session_is_not_a_clean_exit():
    """Found by the red team: SIGINT to the CLI (or its launcher) during a tool call, sent by the agent
    itself, and the CLI exits 0 with an error result and no answer; the case passed as exited 0."""
    aborted = {"type": "result", "subtype": "error_during_execution", "is_error": True,
               "terminal_reason": "aborted_tools", "result": None}
    end = _ending(_result(0), cli_result=aborted)
    assert (end.end_reason, end.exit_code) == ("exited", 1)
    assert end.notes == ("ERROR: the CLI exited 0 but its result is an error (subtype error_during_execution, "
                         "terminal_reason aborted_tools): its session did not complete",)
    silent = _ending(_result(0), cli_result=None)
    assert silent.exit_code == 1 and silent.notes == (
        "ERROR: the CLI exited 0 but wrote no result: its session did not complete",)
    # A non-zero exit says so already, and keeps its code.
    assert _ending(_result(2), cli_result=aborted).exit_code == 2


def test_an_error_after_the_agent_exited_makes_the_case_an_error_and_keeps_its_exit_code():
    """Its results are not all there (copy-out failed, the sandbox broke): it must not read as a clean exit."""
    end = _ending(_result(0), error="cannot copy /workspace out")
    assert (end.end_reason, end.exit_code) == ("error", 0)
    assert end.notes == ("ERROR: cannot copy /workspace out",)


def test_an_error_after_a_deadline_is_an_error_that_still_tells_the_deadline():
    end = _ending(_result(None, EndReason.TIMED_OUT), error="copy-out stopped")
    assert (end.end_reason, end.exit_code, end.limits_hit) == ("error", -1, ("deadline",))
    assert end.notes == ("ERROR: timed out after 30s; the sandbox was frozen and removed", "ERROR: copy-out stopped")


def test_a_failed_hook_stays_hook_failed():
    end = _ending(None, error="before_each hook 0 failed", hook_failed=True)
    assert (end.end_reason, end.exit_code) == ("hook_failed", None)


def test_no_agent_result_is_an_error():
    assert _ending(None, error="the sandbox could not be created").end_reason == "error"


MISMATCH = "replay mismatch: request 2 of the replay (POST /v1/messages) matches no unserved exchange"


def _replayed(result: ExecResult | None, *, error: str | None = None, hook_failed: bool = False):
    return ending(result, StreamSummary(), refused=0, hook_failed=hook_failed, error=error, background_killed=False,
                  timeout_s=30, budget_usd=1.0, replay_mismatch=MISMATCH)


def test_a_replay_that_strayed_from_its_cassette_ends_replay_mismatch_whatever_the_cli_did():
    for result in (_result(1), _result(0), _result(None, EndReason.TIMED_OUT)):
        end = _replayed(result)
        assert end.end_reason == "replay_mismatch" and f"ERROR: {MISMATCH}" in end.notes
    # an error of the case's own after it does not hide the drift
    assert _replayed(_result(1), error="copy-out failed").end_reason == "replay_mismatch"


def test_a_replay_that_never_ran_the_agent_is_not_a_mismatch():
    """Its cassette was not asked for because nothing ran: the hook or the sandbox is the cause."""
    assert _replayed(None, error="before_each hook 0 failed", hook_failed=True).end_reason == "hook_failed"
    end = _replayed(None, error="the sandbox could not be created")
    assert end.end_reason == "error" and not any("replay mismatch" in n for n in end.notes)
# ---- the tool's failures against the skill's ---------------------------------------------------------


def test_the_tools_own_failure_is_an_infra_error_and_a_hook_failure_stays_the_hooks():
    end = ending(None, StreamSummary(), refused=0, hook_failed=False, error="the sandbox could not be started",
                 background_killed=False, timeout_s=30, budget_usd=1.0, infra=True)
    assert end.end_reason == "infra_error"
    hooked = ending(None, StreamSummary(), refused=0, hook_failed=True, error="before_each failed",
                    background_killed=False, timeout_s=30, budget_usd=1.0, infra=True)
    assert hooked.end_reason == "hook_failed"


def test_a_sandbox_that_dies_under_the_agent_is_the_cases_error_never_infra():
    """gVisor: a fork bomb or a memory hog of the agent takes the whole sandbox down. That is the
    skill's doing, and an `infra_error` would excuse it."""
    end = _ending(None, error="sandbox agent-eval-r1-c1 vanished while a command ran")
    assert end.end_reason == "error"
    killed = _ending(_result(137, EndReason.SIGNALED), error="cannot copy /workspace out: the sandbox is gone")
    assert killed.end_reason == "error"


def test_what_the_teardown_of_an_interrupted_run_does_is_interrupted():
    for result, error in ((None, "sandbox was destroyed while a command ran"),
                          (_result(137, EndReason.SIGNALED), None)):
        end = ending(result, StreamSummary(), refused=0, hook_failed=False, error=error, background_killed=False,
                     timeout_s=30, budget_usd=1.0, interrupted=True)
        assert end.end_reason == "interrupted"
    # an agent that had already exited by itself keeps its ending
    assert ending(_result(0), StreamSummary(), refused=0, hook_failed=False, error=None, background_killed=False,
                  timeout_s=30, budget_usd=1.0, interrupted=True).end_reason == "exited"


def test_an_unreachable_gateway_is_the_tools_only_when_the_gateway_saw_nothing():
    unreachable = _result(GATEWAY_UNREACHABLE)
    assert gateway_unreachable(unreachable, ChannelUse(GatewayUse(requests=0)))
    # the agent talked to the model: whatever it exits with afterwards is its own
    assert not gateway_unreachable(unreachable, ChannelUse(GatewayUse(requests=3)))
    assert not gateway_unreachable(_result(1), ChannelUse(GatewayUse(requests=0)))
    assert _ending(unreachable).end_reason == "error"  # without the gateway's word, not excused
