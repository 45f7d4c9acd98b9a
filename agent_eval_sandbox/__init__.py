"""agent-eval-sandbox: agent-eval-harness evals with one hardened container per case."""

__version__ = "0.1.0"
