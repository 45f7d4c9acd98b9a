"""The process exit codes of every command, in one place (README "Exit codes")."""

from __future__ import annotations

OK = 0
# The eval ran and a threshold regressed, or no planned case completed.
REGRESSION = 1
# Bad input: one line on stderr naming the file, the field and the fix (errors.UserError).
USAGE = 2
# A bug of ours: one line (AGENT_EVAL_DEBUG=1 for the traceback).
INTERNAL = 3
# The tool's own plumbing failed for at least one case (`end_reason: infra_error`): the
# verdict is not the skill's, re-run. Wins over REGRESSION: the verdict was computed without those cases.
INFRA = 4
# Interrupted (every sandbox of the run removed first): 128 + the signal.
SIGINT = 130
SIGTERM = 143
