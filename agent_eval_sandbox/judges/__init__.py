"""Judging on the host: case records, judge kinds, aggregation and thresholds.

Kept import-free on purpose: `python -m agent_eval_sandbox.judges._worker`
imports this package, and judge code should start fast.
"""
