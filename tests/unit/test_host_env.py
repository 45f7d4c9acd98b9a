"""Host processes next to agent output: their environment, and the names git takes for `.git`."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_eval_sandbox.git_names import is_git_dir_name
from agent_eval_sandbox.host_env import (
    clean_search_path,
    untrusted_free_env,
    with_git_protection,
)

AGENT = Path("/tmp/aes-x")


@pytest.mark.parametrize("name", [".git", ".GIT", ".Git", ".git.", ".git ", ".git. .", "git~1", "GIT~1",
                                  ".g\u200cit", "\ufeff.git", ".gi\u200et"])
def test_names_git_takes_for_dot_git(name: str) -> None:
    assert is_git_dir_name(name)


@pytest.mark.parametrize("name", ["git", ".github", ".gitignore", ".gitattributes", ".git2", "x.git", "git~2"])
def test_names_that_are_not_dot_git(name: str) -> None:
    assert not is_git_dir_name(name)


def test_search_paths_lose_empty_relative_and_agent_entries() -> None:
    value = ":/usr/bin::bin:./x:/tmp/aes-x/0001/after/bin:/tmp/aes-x:/tmp/aes-xy/bin:/opt/tool/bin:"
    assert clean_search_path(value, [AGENT]) == "/usr/bin:/tmp/aes-xy/bin:/opt/tool/bin"


def test_an_entry_that_resolves_into_agent_output_goes_too(tmp_path: Path) -> None:
    agent = tmp_path / "run"
    (agent / "bin").mkdir(parents=True)
    (tmp_path / "innocent").symlink_to(agent / "bin")
    assert clean_search_path(f"{tmp_path}/innocent:/usr/bin", [agent]) == "/usr/bin"


def test_the_environment_keeps_the_callers_own_values() -> None:
    env = untrusted_free_env({
        "PATH": "bin:/usr/bin", "PYTHONPATH": "lib:.", "HOME": "/root", "BASH_ENV": "/etc/bashenv",
        "PYTHONSTARTUP": "/tmp/aes-x/0001/after/x.py", "LD_PRELOAD": "/lib/a.so /tmp/aes-x/evil.so",
        "GIT_DIR": "/srv/repo.git", "ANTHROPIC_API_KEY": "k",
    }, [AGENT])
    assert env["PATH"] == "/usr/bin" and "PYTHONPATH" not in env
    assert env["BASH_ENV"] == "/etc/bashenv" and env["GIT_DIR"] == "/srv/repo.git"
    assert "PYTHONSTARTUP" not in env and "LD_PRELOAD" not in env
    assert env["HOME"] == "/root" and env["ANTHROPIC_API_KEY"] == "k"
    assert env["GIT_CONFIG_COUNT"] == "1"
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("safe.bareRepository", "explicit")


def test_a_path_of_only_relative_entries_becomes_the_default() -> None:
    assert untrusted_free_env({"PATH": "bin:."}, [AGENT])["PATH"] == "/bin:/usr/bin"


def test_git_protection_comes_after_the_callers_own_command_line_config() -> None:
    env = with_git_protection({"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "a.b", "GIT_CONFIG_VALUE_0": "1",
                               "GIT_CONFIG_KEY_1": "c.d", "GIT_CONFIG_VALUE_1": "2"})
    assert env["GIT_CONFIG_COUNT"] == "3" and env["GIT_CONFIG_KEY_0"] == "a.b"
    assert (env["GIT_CONFIG_KEY_2"], env["GIT_CONFIG_VALUE_2"]) == ("safe.bareRepository", "explicit")
    assert with_git_protection({"GIT_CONFIG_COUNT": "many"}) == {"GIT_CONFIG_COUNT": "many"}
