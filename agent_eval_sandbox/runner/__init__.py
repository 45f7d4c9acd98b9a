"""Orchestration: planning, scheduling, per-case lifecycle, run directory."""
