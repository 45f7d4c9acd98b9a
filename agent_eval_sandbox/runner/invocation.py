"""One invocation, start to finish: stage, sandbox, agent, collect, tear down.

The sandbox and the gateway channel are released in `finally` blocks, so a
case that fails, times out or is interrupted leaves nothing behind; the
scheduler's run scope removes whatever a signal interrupted mid-way.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_eval_sandbox.config.dataset import MODEL_SCRIPT_NAME
from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.models import EvalConfig, parse_size
from agent_eval_sandbox.config.settings import RunSettings
from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.gateway import Channel, ModelGateway
from agent_eval_sandbox.gateway.model_server import ScriptedModelServer
from agent_eval_sandbox.gateway.script import Script, load_script, parse_script
from agent_eval_sandbox.hooks.interception import (
    DECISIONS_FILE_NAME,
    MANAGED_SETTINGS_PATH,
    AnthropicAnswerer,
    Broker,
    CaseContext,
    ContainerSettings,
    MeteredAnswerer,
    ToolHandlers,
    build_container_settings,
)
from agent_eval_sandbox.hooks.lifecycle import CaseInfo, HookFailed, HookRunner, Phase
from agent_eval_sandbox.hooks.outputs import HookOutputs, write_case_hook_outputs
from agent_eval_sandbox.runner import agent_command as ac
from agent_eval_sandbox.runner.batch import assign_files
from agent_eval_sandbox.gateway.conversation import ConversationSnapshot
from agent_eval_sandbox.runner.collect import (
    collect_changes,
    collect_outputs,
    collect_transcripts,
)
from agent_eval_sandbox.runner.events import StreamReader, StreamSummary, background_tasks_killed, stream_objects
from agent_eval_sandbox.runner.integrity import StreamVerifier, verified
from agent_eval_sandbox.runner.plan import Invocation
from agent_eval_sandbox.runner.rundir import TEXT_ERRORS, RunDir, write_json, write_yaml
from agent_eval_sandbox.runner.workspace import (
    DeniedPredicate,
    StagedResource,
    create_output_dirs,
    stage_batch_workspace,
    stage_case_workspace,
)
from agent_eval_sandbox.sandbox.base import (
    BindMount,
    EndReason,
    ExecResult,
    Hardening,
    Limits,
    Sandbox,
    SandboxBackend,
    SandboxError,
    SandboxSpec,
)

COPY_OUT_MAX_FILES = 100_000
# Offline, a case without a script still runs the real CLI end to end.
HOOK_SCRIPT_NAME = "hook_script.yaml"
EMPTY_SCRIPT_TEXT = "(offline: this case has no model_script.yaml, so the scripted model has nothing to do)"
LAUNCH_FAILED = 125


@dataclass
class CaseStatus:
    """Live progress of one invocation, read by the display thread."""

    id: str
    state: str = "queued"
    started: float | None = None
    finished: float | None = None
    channel_cost: Callable[[], float] | None = None
    final_cost: float | None = None
    detail: str = ""

    @property
    def elapsed(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started

    @property
    def cost(self) -> float:
        if self.final_cost is not None:
            return self.final_cost
        return self.channel_cost() if self.channel_cost else 0.0


@dataclass
class RunContext:
    """What every invocation of one run shares."""

    loaded: LoadedConfig
    settings: RunSettings
    run_dir: RunDir
    run_id: str
    backend: SandboxBackend
    image_ref: str
    gateway: ModelGateway
    offline: bool
    staging: Path
    resources: list[StagedResource]
    host_environ: dict[str, str]
    warn: Callable[[str], None]
    hooks: HookRunner | None = None
    handlers: ToolHandlers | None = None  # compiled inputs.tools (None: no interception)
    is_denied: DeniedPredicate = field(default=lambda _rel: False)  # paths kept out of every sandbox
    answerer: AnthropicAnswerer | None = None  # the hook model for online runs
    global_hook_outputs: HookOutputs = field(default_factory=HookOutputs)  # before_all's env and data
    repo_copy: Path | None = None  # the staged project copy for workspace_mode: repo
    cancelled: threading.Event = field(default_factory=threading.Event)

    @property
    def config(self) -> EvalConfig:
        return self.loaded.config


def sandbox_spec(ctx: RunContext, case_id: str, mounts: list[BindMount]) -> SandboxSpec:
    sandbox = ctx.config.sandbox
    return SandboxSpec(
        image=ctx.image_ref,
        run_id=ctx.run_id,
        case_id=case_id,
        # Generous: hooks run on top of the agent's timeout. Only a reaper on
        # another host relies on it; this process removes its own sandboxes.
        deadline_epoch=time.time() + ctx.settings.timeout_s + 3600,
        limits=Limits(
            cpus=sandbox.cpus,
            memory_bytes=sandbox.memory_bytes,
            pids=sandbox.pids,
            workspace_bytes=sandbox.disk_bytes,
            tmp_bytes=parse_size(sandbox.tmp_size),
            home_bytes=parse_size(sandbox.home_size),
        ),
        hardening=Hardening(
            user=sandbox.user,
            read_only_root=sandbox.read_only_root,
            cap_drop=tuple(sandbox.cap_drop),
            cap_add=tuple(sandbox.cap_add),
            no_new_privileges=sandbox.no_new_privileges,
            init=sandbox.init,
            network=sandbox.network,
            runtime=sandbox.runtime,
        ),
        mounts=tuple(mounts),
    )


def offline_script_path(invocation: Invocation, dataset_dir: Path) -> Path:
    """A case's own model_script.yaml; in batch mode the dataset directory's."""
    if len(invocation.cases) > 1 or invocation.id == "batch":
        return dataset_dir / MODEL_SCRIPT_NAME
    return invocation.cases[0].dir / MODEL_SCRIPT_NAME


def offline_hook_script_path(invocation: Invocation, eval_dir: Path) -> Path | None:
    """The offline hook model's script: the case's hook_script.yaml, else the one beside eval.yaml."""
    candidates = [eval_dir / HOOK_SCRIPT_NAME]
    if len(invocation.cases) == 1:
        candidates.insert(0, invocation.cases[0].dir / HOOK_SCRIPT_NAME)
    return next((path for path in candidates if path.is_file()), None)


def offline_script(invocation: Invocation, dataset_dir: Path) -> Script:
    path = offline_script_path(invocation, dataset_dir)
    if path.is_file():
        return load_script(path)
    return parse_script([{"text": EMPTY_SCRIPT_TEXT}], source=f"{invocation.id} (no {path})")


def _stage_workspace(ctx: RunContext, invocation: Invocation, dest: Path) -> None:
    config = ctx.config
    if ctx.repo_copy is not None:
        shutil.copytree(ctx.repo_copy, dest, symlinks=True)
        create_output_dirs(config, dest)
        shutil.copyfile(invocation.cases[0].input_file, dest / invocation.cases[0].input_file.name)
    elif config.is_batch:
        stage_batch_workspace(config, list(invocation.batch_entries), list(invocation.case_order), dest)
    else:
        stage_case_workspace(config, invocation.cases[0], dest, is_denied=ctx.is_denied)


def _end_reason(result: ExecResult | None, refused: int, cli_budget_stop: bool) -> str:
    if result is None:
        return "error"
    if result.end_reason is EndReason.TIMED_OUT:
        return "timed_out"
    if result.end_reason is EndReason.OOM_KILLED:
        return "oom_killed"
    if result.end_reason is EndReason.SIGNALED:
        return "signaled"
    if result.exit_code == LAUNCH_FAILED:
        return "error"
    if refused or cli_budget_stop:
        return "budget_exhausted"
    return "exited"


def _limits_hit(result: ExecResult | None, refused: int, cli_budget_stop: bool) -> list[str]:
    hit = []
    if result is not None:
        if result.end_reason is EndReason.TIMED_OUT:
            hit.append("deadline")
        if result.oom_kills:
            hit.append("memory")
        if result.pids_limit_hit:
            hit.append("pids")
        if result.output_truncated:
            hit.append("output")
    if refused or cli_budget_stop:
        hit.append("budget")
    return hit


class _InvocationRun:
    """The moving parts of one invocation, released in `close()` whatever happened."""

    def __init__(self, ctx: RunContext, invocation: Invocation, status: CaseStatus, slot: str) -> None:
        self.ctx = ctx
        self.invocation = invocation
        self.status = status
        config = ctx.config
        self.out_dir = ctx.run_dir.root if config.is_batch else ctx.run_dir.case(invocation.id)
        stage = ctx.staging / slot
        self.before, self.after = stage / "workspace", stage / "after"
        self.projects, self.channel_dir = stage / "projects", stage / "run"
        self.server: ScriptedModelServer | None = None
        self.hook_model_server: ScriptedModelServer | None = None
        self.channel: Channel | None = None
        self.broker: Broker | None = None
        self.settings: ContainerSettings | None = None
        self.workspace_env: dict[str, str] = {}
        self.sandbox: Sandbox | None = None
        self.copied_out = False
        self.per_case_hooks = not config.is_batch and not config.is_repo_mode and ctx.hooks is not None

    def prepare(self) -> None:
        """Staged workspace, prompt, model upstream and gateway channel."""
        for path in (self.after, self.projects):
            path.mkdir(parents=True, exist_ok=True)
        self.channel_dir.mkdir(parents=True, mode=0o755)
        self.channel_dir.chmod(0o755)  # the sandbox user must reach the socket through it
        (self.channel_dir / "prompt.txt").write_text(self.invocation.prompt, encoding="utf-8")
        for case in self.invocation.cases:
            shutil.copyfile(case.input_file, self.ctx.run_dir.case(case.id) / "input.yaml")
        _stage_workspace(self.ctx, self.invocation, self.before)
        self._write_settings(stage_dir=self.channel_dir.parent)
        if self.ctx.offline:
            self.server = ScriptedModelServer(offline_script(self.invocation, self.ctx.loaded.dataset_dir)).start()
        channel = self.ctx.gateway.open_channel(
            self.invocation.id,
            self.channel_dir / "gateway.sock",
            self.ctx.settings.max_budget_usd,
            self.out_dir / "gateway.jsonl",
            upstream_url=self.server.url if self.server else None,
        )
        self.channel = channel
        self.status.channel_cost = lambda: channel.spent_usd

    def _write_settings(self, stage_dir: Path) -> None:
        """The workspace's .claude/settings.json and the read-only managed settings."""
        self.workspace_env, _ = ac.workspace_env(self.ctx.config, self.ctx.host_environ)
        self.settings = build_container_settings(self.ctx.config, self.ctx.handlers,
                                                 workspace_env=self.workspace_env)
        if self.settings.workspace_settings:
            (self.before / ".claude").mkdir(exist_ok=True)
            (self.before / ".claude" / "settings.json").write_text(
                json.dumps(self.settings.workspace_settings, indent=2))
        managed = stage_dir / "managed-settings.json"
        managed.write_text(json.dumps(self.settings.managed_settings, indent=2))
        managed.chmod(0o644)
        self.managed_settings_file = managed

    def _start_broker(self, agent_env: dict[str, str]) -> None:
        """The host side of the PreToolUse hook: it holds the handlers and the case context."""
        if self.settings is None or not self.settings.intercepts or self.ctx.handlers is None:
            return
        answerer = self.ctx.answerer
        if self.ctx.offline:
            script = offline_hook_script_path(self.invocation, self.ctx.loaded.root)
            answerer = None
            if script is not None:
                self.hook_model_server = ScriptedModelServer(load_script(script)).start()
                answerer = AnthropicAnswerer({"ANTHROPIC_BASE_URL": self.hook_model_server.url,
                                              "ANTHROPIC_API_KEY": "agent-eval-sandbox-offline"})
        context = CaseContext.from_case_dir(self.invocation.cases[0].dir) if not self.ctx.config.is_batch else CaseContext()
        if answerer is not None and self.channel is not None:
            # The questions come from the sandbox and the calls use the host's credentials:
            # each one is paid from the case's budget, through its gateway channel.
            answerer = MeteredAnswerer(answerer, self.channel)
        self.broker = Broker(
            self.invocation.id,
            self.channel_dir / "broker.sock",
            self.ctx.handlers,
            context,
            # The environment the agent's own hook would see: settings env over the process env.
            {**agent_env, **self.workspace_env},
            self.out_dir / DECISIONS_FILE_NAME,
            answerer=answerer,
            warn=self.ctx.warn,
        ).start()

    def get_sandbox(self) -> Sandbox:
        """The case's sandbox, created (and the staged workspace copied in) on first use."""
        if self.sandbox is None:
            if self.ctx.cancelled.is_set():
                raise SandboxError("the run was interrupted before this case started")
            self.status.state = "starting"
            mounts = [BindMount(self.channel_dir, ac.RUN_DIR_IN_SANDBOX),
                      BindMount(self.managed_settings_file, MANAGED_SETTINGS_PATH)]
            mounts += [BindMount(r.host_path, r.container_path) for r in self.ctx.resources]
            self.sandbox = self.ctx.backend.create(sandbox_spec(self.ctx, self.invocation.id, mounts))
            self.sandbox.copy_in(self.before, ac.WORKSPACE, exclude=self.ctx.is_denied)
            self._copied_snapshot = _snapshot(self.before)
        return self.sandbox

    def before_each(self) -> HookOutputs:
        """Run before_each hooks; host hooks prepare the staged workspace before it is copied in."""
        if not self.per_case_hooks or not self.ctx.config.hooks.before_each:
            return HookOutputs()
        case = self.invocation.cases[0]
        self.status.state = "before_each"
        phase = self.ctx.hooks.run(
            Phase.BEFORE_EACH,
            self.ctx.config.hooks.before_each,
            case=CaseInfo(case.id, self.before, case.dir, case.input_file, run_dir=self.out_dir),
            sandbox=self.get_sandbox,
        )
        # A host hook after a container hook changed the staged copy: send it in again.
        if self.sandbox is not None and _snapshot(self.before) != self._copied_snapshot:
            self.sandbox.copy_in(self.before, ac.WORKSPACE, exclude=self.ctx.is_denied)
        return phase.outputs

    def run_agent(self, hook_env: dict[str, str]) -> ExecResult:
        config, ctx = self.ctx.config, self.ctx
        sandbox = self.get_sandbox()
        plugin_dirs = [r.container_path for r in ctx.resources if "/.staged-plugins/" in r.container_path]
        flags = self.settings.cli_flags if self.settings else []
        argv = ac.launcher_argv(ac.claude_argv(config, ctx.settings, plugin_dirs=plugin_dirs, extra_flags=flags))
        agent_env = ac.agent_environment(config, ctx.settings, host_environ=ctx.host_environ, hook_env=hook_env)
        for key in agent_env.dropped:
            ctx.warn(f"{self.invocation.id}: {key} is set by the sandbox itself; the configured value is ignored")
        self._start_broker(agent_env.env)
        self.status.state = "running"
        with open(self.out_dir / "stdout.log", "wb") as stdout, open(self.out_dir / "stderr.log", "wb") as stderr:
            return sandbox.exec(
                argv,
                env=agent_env.env,
                cwd=ac.WORKSPACE,
                stdout=stdout,
                stderr=stderr,
                timeout=ctx.settings.timeout_s,
                on_timeout="freeze",
            )

    def copy_out(self) -> None:
        sandbox = self.sandbox
        assert sandbox is not None
        self.status.state = "collecting"
        cap = self.ctx.config.sandbox.disk_bytes + 64 * 1024 * 1024
        sandbox.copy_out(ac.WORKSPACE, self.after, max_bytes=cap, max_files=COPY_OUT_MAX_FILES)
        sandbox.copy_out(f"{ac.SANDBOX_HOME}/.claude/projects", self.projects, max_bytes=cap,
                         max_files=COPY_OUT_MAX_FILES)
        self.copied_out = True

    def after_each(self) -> None:
        """Always runs; never raises. Host hooks get the workspace as the agent left it, as data:
        they run in the project root (`host_cwd`)."""
        if not self.per_case_hooks or not self.ctx.config.hooks.after_each:
            return
        case = self.invocation.cases[0]
        self.status.state = "after_each"
        workspace = self.after if self.copied_out else self.before
        needs_sandbox = any(h.scope == "container" for h in self.ctx.config.hooks.after_each)
        if needs_sandbox and self.sandbox is not None and self.sandbox.frozen and not self.sandbox.thaw():
            self.ctx.warn(f"{case.id}: the sandbox could not be resumed after its deadline; "
                          "container-scope after_each hooks will fail")
        self.ctx.hooks.run_safe(
            Phase.AFTER_EACH,
            self.ctx.config.hooks.after_each,
            case=CaseInfo(case.id, workspace, case.dir, case.input_file, run_dir=self.out_dir),
            sandbox=self.sandbox,
        )

    def close(self) -> None:
        """Remove the sandbox and stop the channel and model server, side by side.

        The sandbox goes first in its own right: whatever else fails, it is removed."""
        closers = [part.close for part in (self.channel, self.server, self.broker, self.hook_model_server)
                   if part is not None]
        with ThreadPoolExecutor(max_workers=max(1, len(closers))) as pool:
            pending = [pool.submit(closer) for closer in closers]
            if self.sandbox is not None:
                self.sandbox.destroy()
            for future in pending:
                future.result()


def _snapshot(root: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    )


def execute_invocation(ctx: RunContext, invocation: Invocation, status: CaseStatus, slot: str) -> dict[str, Any]:
    """Run one invocation and write its case files; return its run_result entry.

    `slot` names its host staging directory: short, because the gateway's unix
    socket lives there and socket paths are limited to ~100 bytes.
    """
    run = _InvocationRun(ctx, invocation, status, slot)
    status.state = "staging"
    status.started = time.monotonic()
    started_wall = time.time()
    result: ExecResult | None = None
    error: str | None = None
    hook_failed = False
    try:
        try:
            run.prepare()
            case_outputs = run.before_each()
            merged = ctx.global_hook_outputs.merged(case_outputs)
            if run.per_case_hooks:
                write_case_hook_outputs(run.out_dir, case_outputs.data)
            result = run.run_agent(merged.env)
            run.copy_out()
        except HookFailed as exc:
            hook_failed = True
            error = exc.render()
        except (SandboxError, UserError) as exc:
            error = exc.render() if isinstance(exc, UserError) else str(exc)
        except Exception as exc:  # whatever this case ran into (a limit it pushed the host to, a bug) is its own
            error = _internal_error("running the case", exc, run.out_dir)
        finally:
            run.after_each()
    finally:
        try:
            run.close()
        except Exception as exc:  # the run's final teardown removes what is left
            error = error or _internal_error("tearing the case down", exc, run.out_dir)
    channel = run.channel
    try:
        entry = _collect(ctx, invocation, run.out_dir, run.before, run.after, run.projects, result, error,
                         refused=channel.refused if channel else 0,
                         gateway_cost=channel.spent_usd if channel else 0.0,
                         gateway_requests=channel.requests if channel else 0,
                         conversation=channel.conversation.snapshot() if channel else None,
                         started_wall=started_wall, duration=status.elapsed, hook_failed=hook_failed)
    except Exception as exc:
        entry = _uncollected_entry(ctx, invocation, run.out_dir, started_wall, status.elapsed, channel,
                                   _internal_error("collecting the case's results", exc, run.out_dir))
    status.final_cost = entry["cost_usd"] or 0.0
    status.finished = time.monotonic()
    reason = entry["end_reason"]
    status.state = reason if reason != "exited" else ("done" if entry["exit_code"] == 0 else f"exit {entry['exit_code']}")
    return entry


def _collect(
    ctx: RunContext,
    invocation: Invocation,
    out_dir: Path,
    before: Path,
    after: Path,
    projects: Path,
    result: ExecResult | None,
    error: str | None,
    *,
    refused: int,
    gateway_cost: float,
    gateway_requests: int,
    conversation: ConversationSnapshot | None,
    started_wall: float,
    duration: float,
    hook_failed: bool = False,
) -> dict[str, Any]:
    config = ctx.config
    stdout_log, stderr_log = out_dir / "stdout.log", out_dir / "stderr.log"
    verifier = StreamVerifier(conversation)
    summary = _read_agent_stream(stdout_log, verifier, out_dir)
    collect_transcripts(projects, summary.session_id, out_dir)
    notes: list[str] = []
    if verifier.findings:
        notes.append(f"WARNING: {verifier.dropped} line(s) of the agent's output were not what the model sent "
                     "and were dropped (see integrity in run_result.json)" if verifier.dropped else
                     "WARNING: the agent's final result disagreed with the model gateway's record; "
                     "the gateway's values were used (see integrity in run_result.json)")
    if result is not None and after.is_dir():
        mounted = tuple(r.container_path.removeprefix(ac.WORKSPACE + "/") for r in ctx.resources
                        if r.container_path.startswith(ac.WORKSPACE + "/"))
        changes = collect_changes(before, after, out_dir, mounted)
        if config.is_batch:
            _split_batch(ctx, invocation, after)
        else:
            collect_outputs(config, after, out_dir)
        changes_dict = changes.as_dict()
    else:
        changes_dict = {"added": [], "modified": [], "deleted": []}
    end_reason = "hook_failed" if hook_failed else _end_reason(result, refused, summary.budget_exhausted)
    exit_code = result.exit_code if result is not None else None
    if end_reason == "timed_out":
        exit_code = -1
        notes.append(f"ERROR: timed out after {ctx.settings.timeout_s}s; the sandbox was frozen and removed")
    stderr_text = stderr_log.read_text(encoding="utf-8", errors="replace") if stderr_log.exists() else ""
    if exit_code == 0 and summary.unknown_command:
        exit_code = 1
        notes.append(
            f"ERROR: the agent did not recognise '{summary.unknown_command}' (0 turns, no work performed): "
            "the skill is not discoverable — check its name, .claude/skills, or runner.plugin_dirs"
        )
    if exit_code == 0 and background_tasks_killed(stderr_text):
        exit_code = 1
        notes.append(
            "ERROR: the CLI terminated still-running background tasks at the bg-wait ceiling; raise "
            "CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS (runner.env) for long-running skills"
        )
    if refused:
        notes.append(f"ERROR: the gateway refused {refused} request(s): the case budget of "
                     f"${ctx.settings.max_budget_usd:g} was spent")
    if error:
        notes.append(f"ERROR: {error}")
    if notes and stderr_log.parent.exists():
        with open(stderr_log, "a", encoding="utf-8", errors=TEXT_ERRORS) as handle:
            handle.write("".join(f"\n{note}" for note in notes) + "\n")
    cost = max(gateway_cost, summary.cost_usd or 0.0)
    entry: dict[str, Any] = {
        "case_id": invocation.id,
        "cases": [c.id for c in invocation.cases],
        "exit_code": exit_code,
        "end_reason": end_reason,
        "signal": result.signal if result else None,
        "duration_s": round(duration, 3),
        # Time inside the agent's exec; duration_s minus this is the controller's overhead.
        "agent_duration_s": round(result.duration_s, 3) if result else None,
        "started_at": started_wall,
        "token_usage": summary.token_usage,
        "cost_usd": round(cost, 6),
        "cli_cost_usd": summary.cost_usd,
        "gateway": {"requests": gateway_requests, "refused": refused, "spent_usd": round(gateway_cost, 6)},
        "num_turns": summary.num_turns,
        "permission_denials": summary.permission_denials,
        "limits_hit": _limits_hit(result, refused, summary.budget_exhausted),
        "oom_kills": result.oom_kills if result else None,
        "session_id": summary.session_id,
        "model": summary.model or ctx.settings.model,
        "result": summary.result_text,
        "changes": changes_dict,
        "integrity": verifier.report(),
        "error": error,
    }
    if not config.is_batch:
        write_json(out_dir / "run_result.json", entry)
    return entry


def _internal_error(action: str, exc: Exception, out_dir: Path) -> str:
    """One line for the results; the traceback goes to the case's stderr.log."""
    message = f"{action} failed: {type(exc).__name__}: {exc}"
    with contextlib.suppress(OSError):
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "stderr.log", "a", encoding="utf-8", errors=TEXT_ERRORS) as handle:
            handle.write(f"\nERROR: {message}\n" + "".join(traceback.format_exception(exc)))
    return message


def _uncollected_entry(ctx: RunContext, invocation: Invocation, out_dir: Path, started_wall: float,
                       duration: float, channel: Channel | None, error: str) -> dict[str, Any]:
    """The case's entry when its results could not be collected: an error, never a crashed run."""
    spent = round(channel.spent_usd, 6) if channel else 0.0
    entry: dict[str, Any] = {
        "case_id": invocation.id,
        "cases": [c.id for c in invocation.cases],
        "exit_code": None,
        "end_reason": "error",
        "signal": None,
        "duration_s": round(duration, 3),
        "agent_duration_s": None,
        "started_at": started_wall,
        "token_usage": {},
        "cost_usd": spent,
        "cli_cost_usd": None,
        "gateway": {"requests": channel.requests if channel else 0, "refused": channel.refused if channel else 0,
                    "spent_usd": spent},
        "num_turns": None,
        "permission_denials": [],
        "limits_hit": [],
        "oom_kills": None,
        "session_id": None,
        "model": ctx.settings.model,
        "result": None,
        "changes": {"added": [], "modified": [], "deleted": []},
        "integrity": {"checked": False, "dropped": 0, "unverified": 0, "findings": []},
        "error": error,
    }
    if not ctx.config.is_batch:
        with contextlib.suppress(OSError):
            write_json(out_dir / "run_result.json", entry)
    return entry


def _read_agent_stream(stdout_log: Path, verifier: StreamVerifier, out_dir: Path) -> StreamSummary:
    """events.json and the stream summary, from the lines the gateway's record vouches for.

    Read line by line: the host's memory does not grow with what the agent printed.
    """
    reader = StreamReader()
    if stdout_log.is_file():
        with open(stdout_log, encoding="utf-8", errors="replace") as lines:
            for obj in verified(stream_objects(lines), verifier):
                reader.feed(obj)
    write_json(out_dir / "events.json", reader.events)
    return reader.summary()


def _split_batch(ctx: RunContext, invocation: Invocation, after: Path) -> None:
    """Batch mode: each outputs[].path file goes to the case its name belongs to."""
    for output in ctx.config.outputs:
        if not output.path:
            continue
        source = after / output.path
        if not source.is_dir():
            continue
        files = [p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file() and not p.is_symlink()]
        assigned = assign_files(files, list(invocation.case_order), output.batch_pattern)
        for case_id, names in assigned.items():
            for name in names:
                target = ctx.run_dir.case(case_id) / output.path / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / name, target)
    write_yaml(ctx.run_dir.root / "case_order.yaml", list(invocation.case_order))
