import pytest

from agent_eval_sandbox.errors import UserError
from agent_eval_sandbox.gateway.credentials import Credentials, upstream_url_from_env
from agent_eval_sandbox.gateway.gateway import (
    Channel,
    ModelGateway,
    client_headers,
    upstream_headers,
)
from agent_eval_sandbox.gateway.policy import GatewayPolicy
from agent_eval_sandbox.gateway.routes import Route, classify, split_target
from agent_eval_sandbox.inside.forwarder import parse_listen

CLI_HEADERS = [
    ("Accept", "application/json"),
    ("Content-Type", "application/json"),
    ("User-Agent", "claude-cli/2.1.332 (external, sdk-cli)"),
    ("X-Stainless-Retry-Count", "0"),
    ("anthropic-beta", "claude-code-20250219"),
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "placeholder"),
    ("Authorization", "Bearer placeholder"),
    ("x-app", "cli"),
    ("Cookie", "a=b"),
    ("X-Forwarded-For", "1.2.3.4"),
    ("Accept-Encoding", "gzip, br"),
    ("Host", "127.0.0.1:8080"),
]


def test_upstream_headers_replace_the_clients_auth_with_the_hosts():
    headers, dropped = upstream_headers(CLI_HEADERS, Credentials(api_key="sk-real"))
    assert dropped == []
    assert headers["x-api-key"] == "sk-real"
    assert "authorization" not in headers and "cookie" not in headers and "host" not in headers
    assert "x-forwarded-for" not in headers
    assert headers["anthropic-version"] == "2023-06-01" and headers["anthropic-beta"] == "claude-code-20250219"
    assert headers["content-type"] == "application/json" and headers["x-stainless-retry-count"] == "0"
    assert headers["accept-encoding"] == "identity"


def test_auth_token_becomes_a_bearer_header():
    headers, _ = upstream_headers(CLI_HEADERS, Credentials(auth_token="tok"))
    assert headers["authorization"] == "Bearer tok" and "x-api-key" not in headers


CLI_BETAS = ("claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,"
             "thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24,"
             "thinking-display-updates-2026-08-18")


def test_upstream_headers_pass_the_clis_betas_and_drop_the_reaching_ones():
    incoming = [("anthropic-beta", CLI_BETAS), ("Anthropic-Beta", "mcp-client-2025-11-20, web-fetch-2025-09-10"),
                ("anthropic-beta", "files-api-2025-04-14")]
    headers, dropped = upstream_headers(incoming, Credentials(api_key="k"), GatewayPolicy())
    assert headers["anthropic-beta"] == CLI_BETAS
    assert dropped == ["mcp-client-2025-11-20", "web-fetch-2025-09-10", "files-api-2025-04-14"]
    opted_in = GatewayPolicy(server_tools=frozenset({"mcp"}))
    headers, dropped = upstream_headers(incoming, Credentials(api_key="k"), opted_in)
    assert headers["anthropic-beta"] == CLI_BETAS + ",mcp-client-2025-11-20"
    only_reaching = upstream_headers([("anthropic-beta", "web-search-2025-03-05")], Credentials(api_key="k"))[0]
    assert "anthropic-beta" not in only_reaching


def test_client_headers_drop_framing_and_cookies():
    kept = client_headers(
        [
            ("Content-Type", "text/event-stream"),
            ("Content-Length", "5"),
            ("Transfer-Encoding", "chunked"),
            ("request-id", "req_1"),
            ("Set-Cookie", "x"),
            ("Connection", "close"),
            ("retry-after", "3"),
        ]
    )
    assert kept == [("Content-Type", "text/event-stream"), ("request-id", "req_1"), ("retry-after", "3")]


def test_credentials_from_env():
    assert Credentials.from_env({"ANTHROPIC_API_KEY": "k"}).headers() == {"x-api-key": "k"}
    both = Credentials.from_env({"ANTHROPIC_API_KEY": "k", "ANTHROPIC_AUTH_TOKEN": "t"})
    assert both.secrets == ("k", "t")
    with pytest.raises(UserError, match="ANTHROPIC_API_KEY") as caught:
        Credentials.from_env({"ANTHROPIC_API_KEY": ""})
    assert "--offline" in caught.value.fix


def test_credentials_never_show_in_repr():
    assert "sk-secret" not in repr(Credentials(api_key="sk-secret", auth_token="sk-secret"))


def test_upstream_url_from_env():
    assert upstream_url_from_env({}) == "https://api.anthropic.com"
    assert upstream_url_from_env({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}) == "http://127.0.0.1:9"
    assert upstream_url_from_env({"ANTHROPIC_BASE_URL": "https://proxy.example/anthropic/"}) == (
        "https://proxy.example/anthropic"
    )


@pytest.mark.parametrize("url", ["api.anthropic.com", "ftp://x", "http://", "http://x/?a=1", "unix:///tmp/s"])
def test_a_bad_upstream_url_is_a_user_error(url):
    with pytest.raises(UserError, match="not an http"):
        upstream_url_from_env({"ANTHROPIC_BASE_URL": url})
    with pytest.raises(UserError):
        ModelGateway(url, Credentials())


@pytest.mark.parametrize(
    ("method", "target", "route"),
    [
        ("HEAD", "/", Route.PROBE),
        ("GET", "/", Route.PROBE),
        ("HEAD", "/api/hello", Route.PROBE),
        ("POST", "/v1/messages?beta=true", Route.MESSAGES),
        ("POST", "/v1/messages", Route.MESSAGES),
        ("POST", "/v1/messages/count_tokens?beta=true", Route.COUNT_TOKENS),
        ("GET", "/v1/messages", Route.OTHER),
        ("POST", "/", Route.OTHER),
        ("GET", "/v1/models", Route.OTHER),
        ("POST", "/v1/files", Route.OTHER),
        ("POST", "/v1/messages/batches", Route.OTHER),
        ("POST", "/v1/messages/../files", Route.OTHER),
        ("POST", "//evil.example/v1/messages", Route.OTHER),
        ("POST", "http://evil.example/v1/messages", Route.OTHER),
    ],
)
def test_only_model_endpoints_are_routed(method, target, route):
    assert classify(method, target) is route


def test_split_target():
    assert split_target("/v1/messages?beta=true") == ("/v1/messages", "beta=true")
    assert split_target("v1/messages") is None


def test_socket_paths_over_the_unix_limit_are_a_clear_error(tmp_path):
    channel = Channel(
        "c",
        tmp_path / ("x" * 120) / "gateway.sock",
        1.0,
        tmp_path / "log.jsonl",
        upstream_url="http://127.0.0.1:9",
        credentials=Credentials(),
        client=None,  # type: ignore[arg-type]
    )
    with pytest.raises(UserError, match="over the 107-byte limit"):
        channel.start()


def test_an_existing_file_at_the_socket_path_is_not_clobbered(tmp_path):
    (tmp_path / "gateway.sock").write_text("precious")
    channel = Channel(
        "c",
        tmp_path / "gateway.sock",
        1.0,
        tmp_path / "log.jsonl",
        upstream_url="http://127.0.0.1:9",
        credentials=Credentials(),
        client=None,  # type: ignore[arg-type]
    )
    with pytest.raises(UserError, match="not a socket"):
        channel.start()
    assert (tmp_path / "gateway.sock").read_text() == "precious"


def test_negative_budget_is_a_programming_error(tmp_path):
    with pytest.raises(ValueError):
        Channel("c", tmp_path / "s", -1, tmp_path / "l", upstream_url="u", credentials=Credentials(), client=None)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "parsed"), [("127.0.0.1:8080", ("127.0.0.1", 8080)), ("[::1]:0", ("::1", 0))])
def test_forwarder_listen_address(value, parsed):
    assert parse_listen(value) == parsed


@pytest.mark.parametrize("value", ["8080", "127.0.0.1:", ":80", "127.0.0.1:http", "127.0.0.1:70000"])
def test_forwarder_rejects_bad_listen_address(value):
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(value)
