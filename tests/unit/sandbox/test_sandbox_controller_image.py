"""The controller image's build inputs, and what a controller needs to find a sandbox image (no Docker)."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path

import pytest

from agent_eval_sandbox.errors import ImageError
from agent_eval_sandbox.sandbox import controller_image as ci
from agent_eval_sandbox.sandbox.claude_binary import claude_release

REPO = Path(__file__).resolve().parents[3]


def dockerignore_admits(name: str, rules: list[str]) -> bool:
    """The builder's reading of .dockerignore: the last rule matching the path or a parent of it wins;
    `**/` matches any number of leading directories."""
    parts = name.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]

    def matches(path: str, pattern: str) -> bool:
        if pattern.startswith("**/"):
            pieces = path.split("/")
            return any(fnmatch.fnmatchcase("/".join(pieces[i:]), pattern[3:]) for i in range(len(pieces)))
        return fnmatch.fnmatchcase(path, pattern)

    admitted = True
    for rule in rules:
        pattern = rule.lstrip("!")
        if any(matches(prefix, pattern) for prefix in prefixes):
            admitted = rule.startswith("!")
    return admitted


def test_the_cli_context_is_what_dockerignore_lets_through():
    rules = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    sent = {name for name, _ in ci.context_paths(REPO)}
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    admitted = {name for name in tracked if dockerignore_admits(name, rules)}
    assert admitted == {name for name in sent if name in tracked}
    assert "Dockerfile" in sent and "agent_eval_sandbox/cli.py" in sent and "pyproject.toml" in sent
    assert not any(name.startswith(("tests/", ".venv/", "eval/", ".git/")) or "__pycache__" in name for name in sent)


def test_requirements_are_the_dependencies_and_the_build_requirements():
    reqs = ci.requirements(REPO / "pyproject.toml")
    assert any(r.startswith("docker") for r in reqs) and any(r.startswith("setuptools") for r in reqs)


def test_pip_downloads_binary_wheels_for_the_images_python_and_the_daemons_arch(tmp_path):
    argv = ci.pip_download_argv(["docker>=7.1"], tmp_path, "aarch64")
    assert argv[:4] == [sys.executable, "-m", "pip", "download"]
    assert "--only-binary=:all:" in argv and argv[argv.index("--python-version") + 1] == ci.IMAGE_PYTHON
    assert argv[argv.index("--platform") + 1].endswith("_aarch64") and argv[-1] == "docker>=7.1"
    with pytest.raises(ImageError, match="architecture 's390x'"):
        ci.pip_download_argv([], tmp_path, "s390x")


def test_an_installed_copy_builds_the_checkout_it_runs_in_or_is_told_to(tmp_path):
    installed = tmp_path / "site-packages" / "agent_eval_sandbox"
    installed.mkdir(parents=True)
    with pytest.raises(ImageError) as err:
        ci.checkout_root(installed, cwd=tmp_path)
    assert "source checkout" in err.value.render() and "docker build" in err.value.render()
    assert ci.checkout_root(installed, cwd=REPO) == REPO  # `pip install .`, then build in the clone
    assert ci.checkout_root(REPO / "agent_eval_sandbox", cwd=tmp_path) == REPO  # an editable install


def test_a_cached_release_record_is_enough_to_name_the_image(tmp_path, monkeypatch):
    """A controller container with a cache volume but no binary, and no registry: no download is tried."""
    record = tmp_path / "agent-eval-sandbox" / "claude" / "9.9.9" / "x86_64" / "integrity"
    record.parent.mkdir(parents=True)
    record.write_text("sha512-abc\n")
    monkeypatch.setenv("AGENT_EVAL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("AGENT_EVAL_CLAUDE_BINARY", raising=False)
    monkeypatch.setenv("AGENT_EVAL_NPM_REGISTRY", "http://registry.invalid")  # would fail if asked
    release = claude_release("9.9.9", "x86_64")
    assert (release.version, release.integrity) == ("9.9.9", "sha512-abc")
    with pytest.raises(ImageError, match="cannot look up Claude Code 9.9.8"):
        claude_release("9.9.8", "x86_64")
