"""Stage 1 of the reference's two-stage resolution: eval.yaml `inputs.tools` -> handlers.

`extract_patterns` reads tool-name patterns out of a handler's natural-language
`match`, exactly as the reference's keyword heuristic does; it does not
interpret intent. A pre-resolved `tool_handlers.yaml` beside eval.yaml (from
`compile-handlers`, by hand, or by the reference's /eval-analyze) replaces the
heuristic entirely and is used as it is.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

from agent_eval_sandbox.config.loader import LoadedConfig
from agent_eval_sandbox.config.models import DEFAULT_HOOK_MODEL, EvalConfig
from agent_eval_sandbox.interception.handlers import (
    ASK_USER_QUESTION,
    HANDLERS_FILE_NAME,
    Handler,
    HandlersError,
    ToolHandlers,
    load_handlers_file,
)

KNOWN_TOOLS = (ASK_USER_QUESTION, "Bash", "Read", "Write", "Edit", "Glob", "Grep", "Agent", "Skill")
_MCP_TOKEN = re.compile(r"(mcp__\w+(?:__\w+)*(?:\*)?)")


def extract_patterns(match_text: str) -> list[str]:
    """Tool-name patterns named in `match_text` (a keyword match, case-insensitive for tool names).

    Known tool names, then every `mcp__…` token (a trailing `*` kept); with
    none of those, "script" or "api" anywhere means Bash; otherwise `*`.
    """
    lowered = match_text.lower()
    patterns = [tool for tool in KNOWN_TOOLS if tool.lower() in lowered]
    patterns += [m.group(1) for m in _MCP_TOKEN.finditer(match_text)]
    if not patterns and ("script" in lowered or "api" in lowered):
        patterns.append("Bash")
    return patterns or ["*"]


def build_handlers(config: EvalConfig) -> ToolHandlers:
    """The heuristic handlers of `inputs.tools` (prompt files not yet read)."""
    handlers = [
        Handler(
            match=tool.match,
            patterns=extract_patterns(tool.match),
            prompt=tool.prompt,
            prompt_file=tool.prompt_file,
        )
        for tool in config.inputs.tools
    ]
    return ToolHandlers(handlers=handlers, hook_model=config.models.hook or DEFAULT_HOOK_MODEL)


def resolved_handlers_path(loaded: LoadedConfig) -> Path:
    return loaded.root / HANDLERS_FILE_NAME


def compile_handlers(loaded: LoadedConfig) -> ToolHandlers | None:
    """The handlers a run uses, or None when eval.yaml declares no `inputs.tools`.

    A `tool_handlers.yaml` beside eval.yaml is used as it is (validated; its
    prompt files resolve beside it); it only gains `hook_model` from
    `models.hook` (or the default) when it has none, as the reference merges it.
    Otherwise the heuristic runs and prompt files resolve against eval.yaml.
    """
    config = loaded.config
    if not config.inputs.tools:
        return None
    default_model = config.models.hook or DEFAULT_HOOK_MODEL
    resolved = resolved_handlers_path(loaded)
    if resolved.is_file():
        return load_handlers_file(resolved).with_hook_model(default_model)
    return build_handlers(config).resolve_prompt_files(loaded.root, source=loaded.path)


def write_handlers(
    loaded: LoadedConfig,
    output: Path | None = None,
    *,
    llm: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Path:
    """`agent-eval-sandbox compile-handlers`: write the handlers for review.

    With `llm`, `models.hook` (through the anthropic SDK, `ANTHROPIC_BASE_URL`
    and credentials from `environ`) fills `input_filters` and `env_checks`
    from each handler's prompt. The file is written only once everything
    validated, and atomically: an error leaves any previous file untouched.
    """
    handlers = compile_handlers(loaded)
    if handlers is None:
        raise HandlersError(
            "declares no inputs.tools: there is nothing to compile",
            file=loaded.path,
            fix="add inputs.tools entries (match + prompt) first",
        )
    if llm:
        # Imported here: only --llm needs the SDK client.
        from agent_eval_sandbox.interception.refine import refine_handlers

        env = os.environ if environ is None else environ
        handlers = refine_handlers(handlers, environ=env, source=str(loaded.path))
    target = output or resolved_handlers_path(loaded)
    _write_atomically(target, handlers.to_yaml())
    return target


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
