"""The judge worker: runs judge code (check, module/function, python builtins) for the host.

    python -m agent_eval_sandbox.judges._worker PROJECT_ROOT

Protocol: one JSON request per line on stdin,
`{"id": n, "judge": SPEC, "arguments": {...}, "outputs": {...}}` with SPEC one of
`{"kind": "check", "name": ..., "source": ...}`,
`{"kind": "module", "module": ..., "function": ...}`,
`{"kind": "file", "path": ..., "function": "judge"}`; one JSON reply per line
on stdout, `{"id": n, "ok": true, "value": ..., "rationale": "..."}` or
`{"id": n, "ok": false, "error": "..."}`.

Judge code cannot disturb the protocol: before any of it runs, fd 1 is
pointed at stderr and fd 0 at /dev/null, and the protocol uses duplicates of
the original descriptors. A judge that hangs or kills this process is the
host's to notice (it enforces the time limit and reads the exit status).
This module imports only the standard library (and `judges.nothing`, itself
stdlib only). A judge that raises `NothingToJudge` gets an error reply that
says so, without a traceback location.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import textwrap
import traceback
from collections.abc import Callable
from typing import Any

from agent_eval_sandbox.judges.nothing import NothingToJudge

JudgeFn = Callable[[dict[str, Any], dict[str, Any]], Any]
_CHECK_PREFIX = "<check:"


class JudgeLoadError(Exception):
    pass


def wrap_check(snippet: str) -> str:
    """A check snippet as the body of `__check__(outputs, arguments)`, as the reference compiles it."""
    return "def __check__(outputs, arguments):\n" + textwrap.indent(snippet, "    ")


def _load_check(spec: dict[str, Any]) -> JudgeFn:
    source = wrap_check(spec["source"])
    filename = f"{_CHECK_PREFIX}{spec.get('name', '?')}>"
    try:
        code = compile(source, filename, "exec")
    except SyntaxError as exc:
        line = (exc.lineno or 2) - 1
        raise JudgeLoadError(f"the check snippet has a syntax error at line {line}: {exc.msg}") from None
    namespace: dict[str, Any] = {"__name__": f"check_{spec.get('name', '')}"}
    exec(code, namespace)
    fn = namespace["__check__"]
    return lambda outputs, arguments: fn(outputs, arguments)


def _load_module(spec: dict[str, Any]) -> JudgeFn:
    module_name, function = spec["module"], spec["function"]
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import; say why
        raise JudgeLoadError(f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, function, None)
    if not callable(fn):
        raise JudgeLoadError(f"module {module_name!r} has no callable {function!r}")
    return lambda outputs, arguments: fn(outputs=outputs, **arguments)


def _load_file(spec: dict[str, Any]) -> JudgeFn:
    path = spec["path"]
    name = "agent_eval_sandbox_builtin_" + os.path.splitext(os.path.basename(path))[0]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise JudgeLoadError(f"cannot load judge file {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    fn = getattr(module, spec.get("function", "judge"), None)
    if not callable(fn):
        raise JudgeLoadError(f"{path} defines no callable {spec.get('function', 'judge')!r}")
    return lambda outputs, arguments: fn(outputs, **arguments)


_LOADERS = {"check": _load_check, "module": _load_module, "file": _load_file}


def _where(exc: BaseException) -> str:
    """' (check line 3)' or ' (judges.py line 12)': the judge's own frame that raised."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    if not frames:
        return ""
    frame = frames[-1]
    if frame.filename.startswith(_CHECK_PREFIX):
        return f" (check line {(frame.lineno or 1) - 1})"
    return f" ({os.path.basename(frame.filename)} line {frame.lineno})"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"the judge called sys.exit({exc.code!r})"
    message = str(exc)
    return f"{type(exc).__name__}: {message}{_where(exc)}" if message else f"{type(exc).__name__}{_where(exc)}"


def _split(result: Any) -> tuple[Any, Any]:
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    if result is None or isinstance(result, (bool, int, float)):
        return result, ""
    raise TypeError(
        f"the judge returned a {type(result).__name__}; a judge returns (value, rationale)"
    )


def _failure(request_id: Any, error: str) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": error}


def handle(line: bytes, cache: dict[str, JudgeFn]) -> dict[str, Any]:
    """Run one request; whatever the judge does becomes this reply, never an exception."""
    request = json.loads(line)
    request_id = request.get("id")
    spec = request["judge"]
    key = json.dumps(spec, sort_keys=True)
    try:
        if key not in cache:
            cache[key] = _LOADERS[spec["kind"]](spec)
    except JudgeLoadError as exc:
        return _failure(request_id, str(exc))
    except BaseException as exc:  # a judge module that fails at import
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _failure(request_id, f"loading the judge failed: {_describe(exc)}")
    try:
        value, rationale = _split(cache[key](request["outputs"], request.get("arguments") or {}))
        if not isinstance(rationale, str):
            rationale = str(rationale)
    except NothingToJudge as exc:
        return _failure(request_id, exc.describe())
    except BaseException as exc:  # the judge's failure is this sample's error, whatever it is
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _failure(request_id, _describe(exc))
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return _failure(
            request_id, f"the judge returned a value that is not JSON-serialisable: {type(value).__name__} ({exc})"
        )
    return {"id": request_id, "ok": True, "value": value, "rationale": rationale}


def main(argv: list[str]) -> None:
    protocol_in = os.fdopen(os.dup(0), "rb")
    protocol_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    if len(argv) > 1 and argv[1] not in sys.path:
        sys.path.insert(0, argv[1])
    cache: dict[str, JudgeFn] = {}
    for line in protocol_in:
        if not line.strip():
            continue
        reply = handle(line, cache)
        try:
            data = json.dumps(reply)
        except (TypeError, ValueError):
            unencodable = _failure(reply.get("id"), "the judge's rationale could not be encoded")
            data = json.dumps(unencodable)
        protocol_out.write(data.encode("utf-8") + b"\n")
        protocol_out.flush()


if __name__ == "__main__":
    main(sys.argv)
