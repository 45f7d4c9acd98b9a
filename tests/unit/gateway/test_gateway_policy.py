"""The gateway's request policy (pure): models, server-side tools and features, betas."""

import pytest

from agent_eval_sandbox.gateway.policy import (
    GatewayPolicy,
    ModelAllowlist,
    check_request,
    filter_betas,
    tool_kind,
)

ALLOWED = ModelAllowlist.of(["claude-sonnet-4-6", "claude-haiku-4-5", None, ""])
POLICY = GatewayPolicy(models=ALLOWED)
CLIENT_TOOL = {"name": "Bash", "description": "run", "input_schema": {"type": "object"}}


def _body(**extra):
    return {"model": "claude-sonnet-4-6", "max_tokens": 1000, "messages": [{"role": "user", "content": "hi"}],
            "tools": [CLIENT_TOOL], **extra}


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-sonnet-4-6-20260101", "claude-haiku-4-5-20251001",
                                   "us.anthropic.claude-haiku-4-5-20251001-v1:0", "Claude-Sonnet-4-6[1m]"])
def test_configured_models_pass_in_any_spelling(model):
    assert check_request(_body(model=model), POLICY) is None


@pytest.mark.parametrize("model", ["claude-opus-4-6", "claude-sonnet-4-5", "claude-haiku-5-5", "gpt-4o"])
def test_other_models_are_refused_with_what_is_allowed(model):
    refusal = check_request(_body(model=model), POLICY)
    assert refusal is not None and repr(model) in refusal.message
    assert "claude-haiku-4-5, claude-sonnet-4-6" in refusal.message and "sandbox.gateway.models" in refusal.message


def test_an_alias_allows_its_family_as_the_cli_resolves_it():
    allowed = ModelAllowlist.of(["sonnet[1m]", "opusplan"])
    assert allowed.allows("claude-sonnet-5-5") and allowed.allows("claude-3-7-sonnet-20250219")
    assert allowed.allows("claude-opus-5-5") and not allowed.allows("claude-haiku-5-5")
    assert not allowed.allows("sonnet-but-not-claude") and allowed.describe() == "any opus model, any sonnet model"


def test_no_allowlist_allows_any_model_but_still_no_server_tools():
    assert check_request(_body(model="claude-whatever"), GatewayPolicy()) is None
    assert check_request(_body(tools=[{"type": "web_search_20250305", "name": "web_search"}]), GatewayPolicy())


@pytest.mark.parametrize(
    ("tool", "kind"),
    [
        (CLIENT_TOOL, None),
        ({**CLIENT_TOOL, "type": "custom"}, None),
        ({"type": "bash_20250124", "name": "bash"}, None),
        ({"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"}, None),
        ({"type": "memory_20250818", "name": "memory"}, None),
        ({"type": "computer_20250124", "name": "computer"}, None),
        ({"type": "tool_search_tool_regex_20251119", "name": "tool_search"}, None),
        ({"type": "web_search_20250305", "name": "web_search"}, "web_search"),
        ({"type": "web_fetch_20250910", "name": "web_fetch"}, "web_fetch"),
        ({"type": "code_execution_20250825", "name": "code_execution"}, "code_execution"),
        ({"type": "mcp_toolset", "mcp_server_name": "x"}, "mcp"),
        ({"type": "url_context_server_20270101", "name": "later"}, "unknown:url_context_server_20270101"),
        ({"type": 7, "name": "odd"}, "unknown:7"),
    ],
)
def test_tool_kinds(tool, kind):
    assert tool_kind(tool) == kind


@pytest.mark.parametrize("kind", ["web_search", "web_fetch", "code_execution", "mcp"])
def test_server_tools_are_refused_unless_their_kind_is_opted_in(kind):
    tool = {"web_search": {"type": "web_search_20250305", "name": "web_search"},
            "web_fetch": {"type": "web_fetch_20250910", "name": "web_fetch"},
            "code_execution": {"type": "code_execution_20250825", "name": "code_execution"},
            "mcp": {"type": "mcp_toolset", "mcp_server_name": "x"}}[kind]
    refusal = check_request(_body(tools=[CLIENT_TOOL, tool]), POLICY)
    assert refusal is not None and refusal.kind == kind
    assert f"sandbox.gateway.server_tools: [{kind}]" in refusal.message
    opted_in = GatewayPolicy(models=ALLOWED, server_tools=frozenset({kind}))
    assert check_request(_body(tools=[CLIENT_TOOL, tool]), opted_in) is None


def test_an_unknown_tool_type_is_refused_even_when_every_kind_is_opted_in():
    everything = GatewayPolicy(server_tools=frozenset({"web_search", "web_fetch", "code_execution", "mcp"}))
    refusal = check_request(_body(tools=[{"type": "browser_20270101", "name": "browse"}]), everything)
    assert refusal is not None and "'browser_20270101', which is not a client tool" in refusal.message


@pytest.mark.parametrize(
    ("extra", "kind"),
    [
        ({"mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "x"}]}, "mcp"),
        ({"container": "container_011"}, "code_execution"),
        ({"container": {"skills": [{"type": "anthropic", "skill_id": "pptx"}]}}, "code_execution"),
    ],
)
def test_keys_that_reach_out_are_refused_unless_opted_in(extra, kind):
    refusal = check_request(_body(**extra), POLICY)
    assert refusal is not None and refusal.kind == kind and next(iter(extra)) in refusal.message
    assert check_request(_body(**extra), GatewayPolicy(models=ALLOWED, server_tools=frozenset({kind}))) is None


def test_empty_reaching_keys_are_harmless():
    assert check_request(_body(mcp_servers=[], container=None), POLICY) is None


def test_content_the_api_would_fetch_is_refused_wherever_it_sits():
    url_image = {"type": "image", "source": {"type": "url", "url": "https://evil.example/x.png"}}
    nested = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [url_image]}]}]
    refusal = check_request(_body(messages=nested), POLICY)
    assert refusal is not None and refusal.kind == "web_fetch" and "'url' source" in refusal.message
    file_doc = {"type": "document", "source": {"type": "file", "file_id": "file_011"}}
    assert check_request(_body(system=[file_doc]), POLICY).kind == "code_execution"
    inline = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
    assert check_request(_body(messages=[{"role": "user", "content": [inline]}]), POLICY) is None
    assert check_request(_body(messages=nested), GatewayPolicy(server_tools=frozenset({"web_fetch"}))) is None


def test_a_deeply_nested_body_is_walked_without_recursion():
    deep: object = {"type": "image", "source": {"type": "url", "url": "x"}}
    for _ in range(50_000):
        deep = [deep]
    assert check_request(_body(messages=deep), POLICY).kind == "web_fetch"


@pytest.mark.parametrize("max_tokens", [None, 0, -1, True, 1.5, "100"])
def test_max_tokens_must_be_a_positive_integer_for_messages_only(max_tokens):
    body = {k: v for k, v in _body(max_tokens=max_tokens).items() if v is not None}
    assert "max_tokens" in check_request(body, POLICY).message
    assert check_request(body, POLICY, generates=False) is None  # count_tokens takes none


@pytest.mark.parametrize("body", [[], "x", {"max_tokens": 5}, {"model": "", "max_tokens": 5},
                                  {"model": "claude-sonnet-4-6", "max_tokens": 5, "tools": "Bash"}])
def test_malformed_bodies_are_refused(body):
    assert check_request(body, POLICY) is not None


def test_betas_that_enable_reach_are_dropped_the_rest_pass():
    cli = ("claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,"
           "thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24,"
           "thinking-display-updates-2026-08-18")
    assert filter_betas([cli], POLICY) == (cli, [])
    reaching = ["mcp-client-2025-11-20", "web-fetch-2025-09-10", "web-search-2025-03-05", "code-execution-2025-08-25",
                "files-api-2025-04-14", "skills-2025-10-02", "container-2027-01-01"]
    assert filter_betas([", ".join(reaching), "claude-code-20250219"], POLICY) == ("claude-code-20250219", reaching)
    assert filter_betas(["MCP-Client-2025-04-04"], POLICY) == (None, ["MCP-Client-2025-04-04"])
    opted = GatewayPolicy(server_tools=frozenset({"web_fetch", "code_execution"}))
    kept, dropped = filter_betas([",".join(reaching)], opted)
    assert dropped == ["mcp-client-2025-11-20", "web-search-2025-03-05"]
    assert kept.split(",") == [b for b in reaching if b not in dropped]
    assert filter_betas([], POLICY) == (None, [])


def test_billing_modes_the_budget_cannot_price_are_refused_and_their_betas_dropped():
    """Found by the red team: `speed: fast` (and its beta) went through, priced at the standard rate."""
    policy = GatewayPolicy()
    base = {"model": "claude-opus-4-6", "max_tokens": 100, "messages": []}
    for key, value in (("speed", "fast"), ("inference_geo", "us")):
        refusal = check_request({**base, key: value}, policy)
        assert refusal is not None and "billed above the standard price" in refusal.message
    assert check_request({**base, "speed": "standard", "inference_geo": "global"}, policy) is None
    header, dropped = filter_betas(["fast-mode-2026-02-01,context-1m-2025-08-07"], policy)
    assert header == "context-1m-2025-08-07" and dropped == ["fast-mode-2026-02-01"]


def test_the_gateway_reads_bodies_strictly():
    """Found by the red team: the policy checked a parsed copy while the raw bytes went upstream,
    so a key given twice (`tools`, `model`) could mean one thing here and another there."""
    import pytest

    from agent_eval_sandbox.gateway.gateway import DuplicateKeyError, strict_json

    assert strict_json(b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}')["model"] == "m"
    with pytest.raises(DuplicateKeyError) as found:
        strict_json(b'{"tools": [{"type": "web_search_20250305"}], "model": "m", "tools": []}')
    assert found.value.key == "tools"
    with pytest.raises(ValueError):
        strict_json('{"model": "m"}'.encode("utf-16"))
