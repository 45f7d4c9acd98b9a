"""Where each artifact of a run lives (docs/run-directory.md): every name, in one place.

    <runs-dir>/<eval-name>/<run-id>/           RunDir
        run.json, run_result.json, summary.*, report.html, junit.xml, hooks/, ...
        cases/<case-id>/                        CaseDir
            stdout.log, events.json, run_result.json, _modified/, ...

Nothing else in the package spells these names: the runner writes, the judges
and reports read, all through `RunDir` and `CaseDir`.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agent_eval_sandbox.errors import UserError

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
DEFAULT_RUNS_DIR = "eval/runs"

# The run's own files.
RUN_JSON = "run.json"
RUN_RESULT = "run_result.json"
HOOK_OUTPUTS = "hook_outputs.yaml"
HOOKS_DIR = "hooks"
SUMMARY_YAML = "summary.yaml"
SUMMARY_JSON = "summary.json"
REPORT_HTML = "report.html"
JUNIT_XML = "junit.xml"
COMPARISON_JSON = "comparison.json"
CASE_ORDER = "case_order.yaml"
CASES_DIR = "cases"
LATEST = "latest"  # beside the runs of an eval: a link to the one started last (rundir/latest.py)

# A case's files (in batch mode the single invocation's logs sit at the run's root).
INPUT = "input.yaml"
PROMPT = "prompt.txt"
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
EVENTS = "events.json"
TRANSCRIPT = "transcript.jsonl"
SUBAGENTS_DIR = "subagents"
MODIFIED_DIR = "_modified"
WORKSPACE_DIFF = "workspace.diff"
GATEWAY_LOG = "gateway.jsonl"
TOOL_DECISIONS = "tool_decisions.jsonl"
CASSETTE = "cassette.jsonl"
REPLAY_DIFF = "replay_diff.txt"
STEPS_DIR = "steps"  # a pipeline's steps: `steps/<step-id>/` holds a step's own prompt, logs, events, record
REWARD_JSON = "reward.json"
# An agent judge's runs on the case, one directory per sample: _judges/<judge>/<sample>/.
JUDGES_DIR = "_judges"
CASE_RESULT = RUN_RESULT
CASE_HOOK_OUTPUTS = HOOK_OUTPUTS
# Every name the tool gives a case's own files; everything else in a case directory was collected
# from the sandbox. Collected outputs land in the case's folder too (`CaseDir.output`), after these
# are written: eval.yaml may not name an output path whose first segment is one of them
# (config/models.OutputConfig), or the agent's file would replace the tool's record of the case.
# A name added above belongs here.
CASE_RECORDS = (INPUT, PROMPT, CASE_RESULT, STDOUT_LOG, STDERR_LOG, EVENTS, TRANSCRIPT, SUBAGENTS_DIR,
                MODIFIED_DIR, WORKSPACE_DIFF, GATEWAY_LOG, TOOL_DECISIONS, CASE_HOOK_OUTPUTS, CASSETTE,
                REPLAY_DIFF, REWARD_JSON, JUDGES_DIR, STEPS_DIR)
CASE_RECORD_NAMES = frozenset(CASE_RECORDS)

# Inside an agent judge's sample directory.
JUDGE_RESULT = "result.json"
JUDGE_OUTPUT_DIR = "output"

# Files that are a run's, never a case's: a case id must not shadow them.
_CASE_ID = re.compile(r"^[^/\\\x00]+$")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$")


EPOCH_MARK = "#"  # `run --epochs N`: the cases <id>#1 … <id>#N, each its own case directory
EPOCHS_YAML = "epochs.yaml"  # the judges aggregated across epochs (judges/epochs.py)


def epoch_case_id(case_id: str, epoch: int) -> str:
    return f"{case_id}{EPOCH_MARK}{epoch}"


def split_epoch(case_id: str) -> tuple[str, int | None]:
    """`<id>#<n>` -> (id, n); any other id -> (id, None)."""
    base, mark, number = case_id.rpartition(EPOCH_MARK)
    if mark and base and number.isdigit() and not number.startswith("0"):
        return base, int(number)
    return case_id, None


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{stamp}-{secrets.token_hex(3)}"


def validate_run_id(run_id: str) -> str:
    if not RUN_ID_PATTERN.match(run_id) or run_id in (".", ".."):
        raise UserError(
            f"--run-id {run_id!r} is not a valid run id",
            fix="use letters, digits, '.', '_' and '-' only",
        )
    return run_id


def runs_base(cli_value: str | None, environ: Mapping[str, str]) -> Path:
    """`--runs-dir`, else $AGENT_EVAL_RUNS_DIR, else eval/runs."""
    return Path(cli_value or environ.get("AGENT_EVAL_RUNS_DIR") or DEFAULT_RUNS_DIR)


def safe_component(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-")
    return cleaned or "eval"


def judge_file_name(judge: str) -> str:
    """A judge's name as a file or directory name: as written when it is a plain name, else made one
    (with a digest of the name, so two judges never share it)."""
    if _PLAIN_NAME.match(judge):
        return judge
    digest = hashlib.sha256(judge.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe_component(judge)[:48]}-{digest}"


def is_case_id(name: str) -> bool:
    """A directory name under cases/ that can be a case (not hidden, no separators)."""
    return bool(_CASE_ID.match(name)) and name not in (".", "..") and not name.startswith(".")


@dataclass(frozen=True)
class SessionFiles:
    """What one `claude -p` session leaves wherever it is recorded: a case's, a step's or an agent judge's."""

    path: Path

    @property
    def prompt(self) -> Path:
        """The prompt the agent was given, as sent (in batch mode, at the run's root)."""
        return self.path / PROMPT

    @property
    def stdout_log(self) -> Path:
        return self.path / STDOUT_LOG

    @property
    def stderr_log(self) -> Path:
        return self.path / STDERR_LOG

    @property
    def events(self) -> Path:
        return self.path / EVENTS


@dataclass(frozen=True)
class CaseDir(SessionFiles):
    """`cases/<case-id>/`, or the run's root for a batch invocation's own logs."""

    @property
    def input(self) -> Path:
        return self.path / INPUT

    @property
    def transcript(self) -> Path:
        return self.path / TRANSCRIPT

    @property
    def subagents(self) -> Path:
        return self.path / SUBAGENTS_DIR

    @property
    def modified(self) -> Path:
        return self.path / MODIFIED_DIR

    @property
    def workspace_diff(self) -> Path:
        return self.path / WORKSPACE_DIFF

    @property
    def gateway_log(self) -> Path:
        return self.path / GATEWAY_LOG

    @property
    def tool_decisions(self) -> Path:
        return self.path / TOOL_DECISIONS

    @property
    def cassette(self) -> Path:
        """The case's model exchanges (`run --record`), what `run --replay` serves."""
        return self.path / CASSETTE

    @property
    def replay_diff(self) -> Path:
        """A replayed case's mismatch: the recorded request against the one sent."""
        return self.path / REPLAY_DIFF

    @property
    def hook_outputs(self) -> Path:
        return self.path / CASE_HOOK_OUTPUTS

    @property
    def reward(self) -> Path:
        """The case's reward as the reference's Harbor verifier writes it (`reward:` in eval.yaml)."""
        return self.path / REWARD_JSON

    @property
    def result(self) -> Path:
        return self.path / CASE_RESULT

    def step(self, step_id: str) -> CaseDir:
        """`steps/<step-id>/` of a pipeline's case: the step's prompt.txt, stdout.log, stderr.log,
        events.json and run_result.json (its `StepOutcome`), under the same names as a case's."""
        return CaseDir(self.path / STEPS_DIR / step_id)

    def output(self, relative: str) -> Path:
        """A collected `outputs[].path` (relative to the workspace)."""
        return self.path / relative

    @property
    def judges(self) -> Path:
        return self.path / JUDGES_DIR

    def judge_run(self, judge: str, sample: int) -> JudgeRunDir:
        """One sample of an agent judge on this case (1-based)."""
        return JudgeRunDir(self.judges / judge_file_name(judge) / str(sample))

    def ensure(self) -> CaseDir:
        self.path.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class JudgeRunDir(SessionFiles):
    """`cases/<id>/_judges/<judge>/<sample>/`: what one run of an agent judge left."""

    @property
    def gateway_log(self) -> Path:
        return self.path / GATEWAY_LOG

    @property
    def output(self) -> Path:
        """The judge's ./output/ as it left it (score.json, anything else it wrote there)."""
        return self.path / JUDGE_OUTPUT_DIR

    @property
    def result(self) -> Path:
        return self.path / JUDGE_RESULT


@dataclass(frozen=True)
class RunDir:
    root: Path

    @classmethod
    def create(cls, base: Path, eval_name: str, run_id: str) -> RunDir:
        root = base / safe_component(eval_name) / run_id
        if run_id == LATEST:
            raise UserError("--run-id latest is reserved: it names the link to the newest run",
                            fix="choose another --run-id")
        if root.exists():
            raise UserError(f"run directory {root} already exists", fix="choose another --run-id")
        (root / CASES_DIR).mkdir(parents=True)
        (root / HOOKS_DIR).mkdir()
        return cls(root)

    @property
    def run_json(self) -> Path:
        return self.root / RUN_JSON

    @property
    def run_result(self) -> Path:
        return self.root / RUN_RESULT

    @property
    def hook_outputs(self) -> Path:
        return self.root / HOOK_OUTPUTS

    @property
    def hooks(self) -> Path:
        return self.root / HOOKS_DIR

    @property
    def summary_yaml(self) -> Path:
        return self.root / SUMMARY_YAML

    @property
    def summary_json(self) -> Path:
        return self.root / SUMMARY_JSON

    @property
    def report_html(self) -> Path:
        return self.root / REPORT_HTML

    @property
    def junit_xml(self) -> Path:
        return self.root / JUNIT_XML

    @property
    def comparison_json(self) -> Path:
        """The run's comparison with a baseline run (`compare`, `run --baseline`)."""
        return self.root / COMPARISON_JSON

    @property
    def epochs_yaml(self) -> Path:
        return self.root / EPOCHS_YAML

    @property
    def case_order(self) -> Path:
        return self.root / CASE_ORDER

    @property
    def cases(self) -> Path:
        return self.root / CASES_DIR

    @property
    def batch_logs(self) -> CaseDir:
        """Where a batch invocation's own logs and results go: the run's root."""
        return CaseDir(self.root)

    def case(self, case_id: str) -> CaseDir:
        return CaseDir(self.root / CASES_DIR / case_id)

    def case_dirs(self) -> list[str]:
        """The case ids that have a directory under cases/."""
        if not self.cases.is_dir():
            return []
        return sorted(p.name for p in self.cases.iterdir() if p.is_dir() and not p.is_symlink() and is_case_id(p.name))


def relative_link(run: RunDir, path: Path) -> str:
    """A path inside the run directory as the reports link it (posix, relative to the root)."""
    return os.path.relpath(path, run.root).replace(os.sep, "/")
