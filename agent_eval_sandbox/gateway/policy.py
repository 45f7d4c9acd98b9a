"""What a Messages request may ask the model API to do (pure).

The gateway's socket lets the untrusted skill send any request body it likes;
with the host's credentials attached, that body decides what the API does. So
besides the endpoint allowlist (`routes.py`) and the budget (`budget.py`) a
request must pass this policy:

- its `model` is one the eval configured (compared by `pricing.canonical_model`);
- it reaches nothing outside the API: no server-side tools (web search, web
  fetch, code execution, MCP toolsets), no `mcp_servers` or `container`, no
  `url` or `file` content sources, unless the eval opted into that kind;
- betas that switch such reach on are dropped from `anthropic-beta` unless the
  matching kind is opted in; every other beta passes untouched.

Tool types: a client tool (no `type`, or `custom`) runs in the sandbox; the
typed client tools (`bash_*`, `text_editor_*`, `memory_*`, `computer_*`,
`tool_search_tool_*`) also run client-side or only search the request's own
tools. Any other `type` is a server tool: a known kind when it names one, and
refused as unknown otherwise, so a server tool added to the API later fails
closed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from agent_eval_sandbox.gateway.pricing import canonical_model

ServerToolKind = Literal["web_search", "web_fetch", "code_execution", "mcp"]
SERVER_TOOL_KINDS: tuple[str, ...] = get_args(ServerToolKind)

CLIENT_TOOL_TYPE_PREFIXES = ("bash_", "text_editor_", "memory_", "computer_", "tool_search_tool_")
SERVER_TOOL_TYPE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("web_search_", "web_search"),
    ("web_fetch_", "web_fetch"),
    ("code_execution_", "code_execution"),
    ("mcp_toolset", "mcp"),
)
# Top-level request keys that make the API reach out or run code on its side.
REACHING_KEYS = (("mcp_servers", "mcp"), ("container", "code_execution"))
# Content sources the API fetches itself (a URL), or reads from the account's file store.
REACHING_SOURCES = (("url", "web_fetch"), ("file", "code_execution"))
# anthropic-beta values (by prefix) that enable a kind of server-side reach.
REACHING_BETAS = (
    ("mcp-client", "mcp"),
    ("web-fetch", "web_fetch"),
    ("web-search", "web_search"),
    ("code-execution", "code_execution"),
    ("files-api", "code_execution"),
    ("skills", "code_execution"),
    ("container", "code_execution"),
)

# Request keys that change what a request costs in ways the budget does not price (fast mode
# bills several times the standard rate, a data-residency geo a premium): refused, so the
# budget's worst case holds. (key, the values that cost the standard price)
PRICED_KEYS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("speed", (None, "standard")),
    ("inference_geo", (None, "global")),
)
# anthropic-beta values (by prefix) of those billing modes: dropped.
PRICED_BETAS = ("fast-mode",)

# Claude Code's model aliases name a family; which version they resolve to is
# the CLI's choice (2.1.332: `sonnet` -> claude-sonnet-5-5, `opusplan` -> sonnet
# outside plan mode, `default`/`best` -> opus), so an alias allows its families.
ALIAS_FAMILIES: dict[str, tuple[str, ...]] = {
    "sonnet": ("sonnet",),
    "opus": ("opus",),
    "haiku": ("haiku",),
    "opusplan": ("opus", "sonnet"),
    "default": ("opus", "sonnet"),
    "best": ("opus",),
}
# Claude Code's built-in Explore subagent and background work use a Haiku model.
DEFAULT_SMALL_MODELS = ("claude-haiku-4-5",)
DEFAULT_MAX_TOKENS_CEILING = 128_000


@dataclass(frozen=True)
class ModelAllowlist:
    """Canonical model names, plus whole families for configured aliases."""

    names: frozenset[str] = frozenset()
    families: frozenset[str] = frozenset()

    @classmethod
    def of(cls, models: Iterable[str | None]) -> ModelAllowlist:
        names: set[str] = set()
        families: set[str] = set()
        for model in models:
            if not model or not model.strip():
                continue
            alias = model.strip().lower().removesuffix("[1m]")
            if alias in ALIAS_FAMILIES:
                families.update(ALIAS_FAMILIES[alias])
            else:
                names.add(canonical_model(model.strip()))
        return cls(frozenset(names), frozenset(families))

    def allows(self, model: str) -> bool:
        name = canonical_model(model)
        if name in self.names:
            return True
        parts = name.split("-")
        return parts[0] == "claude" and any(family in parts[1:] for family in self.families)

    def describe(self) -> str:
        listed = sorted(self.names) + [f"any {family} model" for family in sorted(self.families)]
        return ", ".join(listed) or "none"


@dataclass(frozen=True)
class GatewayPolicy:
    """`models=None` allows any model (for direct users of the gateway; a run always lists them)."""

    models: ModelAllowlist | None = None
    server_tools: frozenset[str] = frozenset()
    max_tokens_ceiling: int = DEFAULT_MAX_TOKENS_CEILING


@dataclass(frozen=True)
class Refusal:
    message: str
    kind: str | None = None  # the server-tool kind that would allow it


def tool_kind(tool: Any) -> str | None:
    """None for a client tool; a server-tool kind, or `unknown:<type>`, for anything else."""
    if not isinstance(tool, Mapping):
        return None
    kind = tool.get("type")
    if kind is None or kind == "custom":
        return None
    if not isinstance(kind, str):
        return f"unknown:{kind!r}"
    if kind.startswith(CLIENT_TOOL_TYPE_PREFIXES):
        return None
    for prefix, server_kind in SERVER_TOOL_TYPE_PREFIXES:
        if kind.startswith(prefix):
            return server_kind
    return f"unknown:{kind}"


def _sources(value: Any) -> Iterator[str]:
    """The `source.type` of every content block anywhere in `value` (iterative: bodies nest deeply)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            source = item.get("source")
            if isinstance(source, Mapping) and isinstance(source.get("type"), str):
                yield source["type"]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _opt_in_hint(kind: str) -> str:
    return f"the eval can allow it with sandbox.gateway.server_tools: [{kind}]"


def check_request(body: Any, policy: GatewayPolicy, *, generates: bool = True) -> Refusal | None:
    """Why a Messages body (`generates=False`: a count_tokens body) must not be forwarded, or None."""
    if not isinstance(body, Mapping):
        return Refusal("the request body must be a JSON object")
    # In this order: the first refusal is the one reported (a Refusal is always truthy).
    return (
        _model_refusal(body, policy, generates=generates)
        or _tools_refusal(body.get("tools"), policy.server_tools)
        or _reach_refusal(body, policy.server_tools)
    )


def _model_refusal(body: Mapping[str, Any], policy: GatewayPolicy, *, generates: bool) -> Refusal | None:
    """The model must be named and allowed; a generating request must bound its output."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return Refusal("the request names no model")
    max_tokens = body.get("max_tokens")
    if generates and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        # The budget reserves by it: the API's own rule, checked before anything is reserved.
        return Refusal("`max_tokens` must be a positive integer")
    if policy.models is not None and not policy.models.allows(model):
        return Refusal(f"model {model!r} is not allowed for this eval (allowed: {policy.models.describe()}); "
                       "add it to sandbox.gateway.models in eval.yaml to allow it")
    return None


def _tools_refusal(tools: Any, allowed: frozenset[str]) -> Refusal | None:
    """Only client tools, and the server tools the eval allows."""
    if tools is not None and not isinstance(tools, list):
        return Refusal("`tools` must be a list")
    for tool in tools or []:
        kind = tool_kind(tool)
        if kind is None or kind in allowed:
            continue
        name = tool.get("name") if isinstance(tool, Mapping) else None
        if kind.startswith("unknown:"):
            return Refusal(f"tool {name!r} has type {kind.removeprefix('unknown:')!r}, which is not a client tool; "
                           "server-side tools are not allowed through this gateway")
        return Refusal(f"server tool {name!r} ({kind}) is not allowed: {_opt_in_hint(kind)}", kind)
    return None


def _reach_refusal(body: Mapping[str, Any], allowed: frozenset[str]) -> Refusal | None:
    """No key or content source that makes the API reach out, and nothing billed above the standard price."""
    for key, kind in REACHING_KEYS:
        if body.get(key) not in (None, [], {}) and kind not in allowed:
            return Refusal(f"`{key}` is not allowed: {_opt_in_hint(kind)}", kind)
    for key, standard in PRICED_KEYS:
        if body.get(key) not in standard:
            return Refusal(f"`{key}: {body.get(key)!r}` is billed above the standard price, which the case's budget "
                           "cannot account for; it is not allowed through this gateway")
    reaching = dict(REACHING_SOURCES)
    for source in _sources([body.get("messages"), body.get("system")]):
        needed = reaching.get(source)
        if needed is not None and needed not in allowed:
            return Refusal(f"content with a {source!r} source makes the API fetch it: {_opt_in_hint(needed)}", needed)
    return None


def filter_betas(values: Iterable[str], policy: GatewayPolicy) -> tuple[str | None, list[str]]:
    """The anthropic-beta header to send (None: none) and the betas dropped from it."""
    kept: list[str] = []
    dropped: list[str] = []
    for value in values:
        for beta in (part.strip() for part in value.split(",")):
            if not beta:
                continue
            kind = next((k for prefix, k in REACHING_BETAS if beta.lower().startswith(prefix)), None)
            priced = beta.lower().startswith(PRICED_BETAS)
            (dropped if priced or (kind is not None and kind not in policy.server_tools) else kept).append(beta)
    return (",".join(kept) or None), dropped
