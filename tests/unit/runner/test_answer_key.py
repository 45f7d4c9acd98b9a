"""The answer key: which project files judges, hooks and interception use, and that staging leaves them out."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.interception import compile_handlers
from agent_eval_sandbox.runner.answer_key import (
    answer_key,
    command_words,
    left_out_line,
)
from agent_eval_sandbox.runner.python_imports import imported_names, project_files_of
from agent_eval_sandbox.runner.repo_history import commit_snapshot
from agent_eval_sandbox.runner.workspace import (
    stage_project_resources,
    stage_repo_workspace,
)

EVAL = """
execution: {prompt: p}
dataset: {path: cases}
runner: {plugin_dirs: [plug]}
inputs:
  tools:
    - match: AskUserQuestion
      prompt_file: skills/answers/prompt.md
hooks:
  before_all:
    - command: bash scripts/hooks/host.sh && echo done > /dev/null
      condition: test -x scripts/hooks/cond.sh
    - command: '"$AGENT_EVAL_PROJECT_ROOT/scripts/hooks/abs.sh" --config=scripts/hooks/conf.txt "$CASE_ID"'
    - command: bash scripts/hooks/both.sh
  before_each:
    - scope: container
      command: bash /workspace/scripts/hooks/box.sh; bash "$CASE_WORKSPACE/scripts/hooks/both.sh"
judges:
  - name: m
    module: scripts.grade
    function: score
  - name: q
    module: eval.judges.quality
    function: score
  - name: r
    prompt_file: .context/rubric.md
    context: [.context/guide.md, plug/context.md]
"""

FILES = {
    "cases/c1/input.yaml": "prompt: hi\n",
    "CLAUDE.md": "be brief\n",
    "scripts/__init__.py": "",
    "scripts/helper.sh": "echo help\n",
    "scripts/unrelated.py": "X = 1\n",
    "scripts/grade.py": "from .grade_helpers import verdict\n\ndef score(outputs):\n    return verdict(), ''\n",
    "scripts/grade_helpers.py": "import os\n\ndef verdict():\n    return True\n",
    "eval/judges/__init__.py": "",
    "eval/judges/quality.py": "from lib import shared_util\nfrom . import common\n",
    "eval/judges/common.py": "",
    "eval/judges/data.json": "{}",
    "lib/shared_util.py": "",
    "lib/other.py": "",
    "scripts/hooks/host.sh": "", "scripts/hooks/cond.sh": "", "scripts/hooks/abs.sh": "",
    "scripts/hooks/conf.txt": "", "scripts/hooks/box.sh": "", "scripts/hooks/both.sh": "",
    ".context/rubric.md": "rubric {{ conversation }}\n",
    ".context/guide.md": "guide\n",
    ".context/notes.md": "notes\n",
    "skills/answers/prompt.md": "answer yes\n",
    "skills/real/SKILL.md": "---\nname: real\n---\n",
    "skills/model_script.yaml": "- text: hi\n",
    ".claude/skills/s/SKILL.md": "---\nname: s\n---\n",
    "plug/.claude-plugin/plugin.json": "{}",
    "plug/context.md": "plugin context\n",
    "src/app.py": "print(1)\n",
    "judge_script.yaml": "[]\n",
}
# Staged into every sandbox's resources: the key's files among them go.
GONE = {"scripts/__init__.py", "scripts/grade.py", "scripts/grade_helpers.py", "scripts/hooks/host.sh",
        "scripts/hooks/cond.sh", "scripts/hooks/abs.sh", "scripts/hooks/conf.txt", ".context/rubric.md",
        ".context/guide.md", "skills/answers/prompt.md", "skills/model_script.yaml",
        ".claude/skills/s/rubric-link.md", "plug/context.md"}
KEPT = {"CLAUDE.md", "scripts/helper.sh", "scripts/unrelated.py", "scripts/hooks/box.sh", "scripts/hooks/both.sh",
        ".context/notes.md", "skills/real/SKILL.md", ".claude/skills/s/SKILL.md", "plug/.claude-plugin/plugin.json"}
STAGED_AS = {"plug/": ".staged-plugins/plug/"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "eval.yaml").write_text(textwrap.dedent(EVAL))
    # a second name for an answer-key file, inside a mounted directory
    os.link(root / ".context" / "rubric.md", root / ".claude" / "skills" / "s" / "rubric-link.md")
    return root


def _key(project: Path):
    loaded = load_eval_config(project / "eval.yaml")
    return loaded, answer_key(loaded, runs_base=project / "runs", handlers=compile_handlers(loaded))


def _staged_name(rel: str) -> str:
    for prefix, staged in STAGED_AS.items():
        if rel.startswith(prefix):
            return staged + rel[len(prefix):]
    return rel


def test_resources_are_staged_without_the_answer_key(project: Path, tmp_path: Path) -> None:
    loaded, key = _key(project)
    dest = tmp_path / "stage"
    staged = stage_project_resources(loaded.config, loaded.paths, dest, exclude=key)
    present = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert present == {_staged_name(rel) for rel in KEPT}
    assert {p.relative_to(project).as_posix() for p in staged.report.excluded} == GONE
    line = left_out_line(key, staged.report.excluded, project)
    assert line.startswith("left out of the sandbox") and all(rel in line for rel in GONE)


def test_the_repo_copy_leaves_out_the_same_key_and_more(project: Path, tmp_path: Path) -> None:
    loaded, key = _key(project)
    dest = tmp_path / "repo"
    report = stage_repo_workspace(project, dest, exclude=key)
    present = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    for rel in KEPT | {"src/app.py", "lib/other.py"}:
        assert rel in present, rel
    for rel in GONE | {"eval.yaml", "cases/c1/input.yaml", "judge_script.yaml", "lib/shared_util.py",
                       "eval/judges/quality.py", "eval/judges/data.json"}:
        assert rel not in present, rel
    # eval.yaml and the dataset are always out: no warning about them
    line = left_out_line(key, report.excluded, project)
    assert "eval.yaml" not in line.split(": ", 1)[1].split(", ") and "cases" not in line


def test_a_judge_package_goes_whole_but_a_resource_directory_does_not(project: Path) -> None:
    _, key = _key(project)
    assert key.covers(project / "eval" / "judges" / "data.json")  # the judge's own package
    assert not key.covers(project / "scripts" / "unrelated.py")  # scripts/ is a resource dir
    assert key.covers(project / "lib" / "shared_util.py") and not key.covers(project / "lib" / "other.py")


def test_a_hook_file_a_container_hook_needs_stays(project: Path) -> None:
    _, key = _key(project)
    assert not key.covers(project / "scripts" / "hooks" / "both.sh")
    assert not key.covers(project / "scripts" / "hooks" / "box.sh")
    assert key.covers(project / "scripts" / "hooks" / "host.sh")


def test_command_words_split_operators_and_strip_quotes() -> None:
    assert command_words('a "b c">out;d|e $X') == ["a", "b c", ">", "out", ";", "d", "|", "e", "$X"]
    assert command_words("echo 'unbalanced") == ["echo", "'unbalanced"]


# ---- python imports ------------------------------------------------------------------------


def test_imports_are_followed_relative_and_absolute(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "from . import init_helper\n",
        "pkg/init_helper.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/judge.py": "import json\nfrom ..util import f\nfrom . import sibling\nimport top.mod\n",
        "pkg/sub/sibling.py": "from pkg.deep import *\n",
        "pkg/util.py": "",
        "pkg/deep.py": "",
        "top/mod.py": "this is not python (\n",
        "pkg/unused.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {p.relative_to(tmp_path).as_posix() for p in project_files_of(tmp_path, "pkg.sub.judge")}
    assert found == set(files) - {"pkg/unused.py"}
    assert "pkg.util.f" in imported_names(tmp_path / "pkg/sub/judge.py", "pkg.sub.judge")
    assert project_files_of(tmp_path, "not_in_project") == set()


# ---- the repo-mode history ------------------------------------------------------------------


def _git(tree: Path, *args: str) -> str:
    env = {"PATH": os.environ["PATH"], "HOME": str(tree), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(tree), *args], env=env, capture_output=True, text=True,
                           check=True).stdout


def test_the_snapshot_is_one_reproducible_commit_made_without_the_users_git_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The user's own git setup would run a hook on commit: it must not apply.
    home = tmp_path / "home"
    (home / "hooks").mkdir(parents=True)
    (home / "hooks" / "post-commit").write_text(f"#!/bin/sh\ntouch {tmp_path}/USER-HOOK-RAN\n")
    (home / "hooks" / "post-commit").chmod(0o755)
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {home}/hooks\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    trees = []
    for name in ("one", "two"):
        tree = tmp_path / name
        (tree / "src").mkdir(parents=True)
        (tree / "src" / "a.py").write_text("a\n")
        (tree / ".gitignore").write_text("*.log\n")
        (tree / "debug.log").write_text("x\n")
        assert commit_snapshot(tree, path_var=os.environ["PATH"]) is None
        trees.append(tree)
    assert _git(trees[0], "rev-list", "--all").split() == _git(trees[1], "rev-list", "--all").split()
    assert len(_git(trees[0], "rev-list", "--all").split()) == 1
    assert _git(trees[0], "ls-files").split() == [".gitignore", "src/a.py"]
    assert _git(trees[0], "status", "--porcelain") == ""
    assert not (tmp_path / "USER-HOOK-RAN").exists() and not (tmp_path / "elsewhere").exists()
    assert not list((trees[0] / ".git").glob("hooks/*"))  # no sample hooks from templates


def test_without_git_the_copy_has_no_history_and_a_note_says_so(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    note = commit_snapshot(tmp_path, path_var=str(tmp_path / "no-bin"))
    assert note is not None and "git is not installed" in note
    assert not (tmp_path / ".git").exists()


def test_a_module_a_host_hook_runs_with_python_m_is_left_out(project: Path) -> None:
    """Found by the red team: `python3 -m scripts.hostcheck` left scripts/hostcheck.py mounted."""
    (project / "scripts" / "hostcheck.py").write_text("print('checking')\n")
    text = (project / "eval.yaml").read_text().replace(
        "    - command: bash scripts/hooks/both.sh\n",
        "    - command: bash scripts/hooks/both.sh\n  after_each:\n    - command: python3 -m scripts.hostcheck\n")
    (project / "eval.yaml").write_text(text)
    _, key = _key(project)
    assert key.covers(project.resolve() / "scripts" / "hostcheck.py")
    assert not key.covers(project.resolve() / "scripts" / "helper.sh")


def test_other_evals_and_recorded_runs_in_the_project_are_answer_key(project: Path) -> None:
    """Found by the red team: a repo-mode copy carried a sibling eval (its inline checks and its
    cases' annotations) and old runs (every case's inputs, outputs and verdicts)."""
    (project / "eval-hard.yaml").write_text(textwrap.dedent("""
        execution: {prompt: p}
        dataset: {path: eval/hard/cases}
        judges:
          - {name: strict, check: "return True, 'ok'"}
          - {name: graded, module: lib.other, function: score}
    """))
    (project / "eval" / "hard" / "cases" / "h1").mkdir(parents=True)
    (project / "eval" / "hard" / "cases" / "h1" / "annotations.yaml").write_text("expected: secret\n")
    run = project / "eval" / "runs" / "demo" / "20250101-000000-abc123"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"tool": "agent-eval-sandbox", "run_id": "x"}')
    (project / "notes.yaml").write_text("a: plain data file\n")
    _, key = _key(project)
    root = project.resolve()
    for gone in ("eval-hard.yaml", "eval/hard/cases/h1/annotations.yaml", "lib/other.py",
                 "eval/runs/demo/20250101-000000-abc123/run.json"):
        assert key.covers(root / gone), gone
    for kept in ("notes.yaml", "src/app.py", "CLAUDE.md"):
        assert not key.covers(root / kept), kept


def test_the_repo_copy_takes_only_what_git_has_of_the_project(project: Path, tmp_path: Path) -> None:
    """Found by the red team: a gitignored `.env` with a key went into the sandbox."""
    from agent_eval_sandbox.runner.repo_history import project_files

    (project / ".env").write_text("API_KEY=sk-secret\n")
    (project / ".gitignore").write_text(".env\nbuild/\n")
    (project / "build").mkdir()
    (project / "build" / "out.bin").write_text("x")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    only = project_files(project, path_var=os.environ["PATH"])
    assert only is not None and ".env" not in only and "src/app.py" in only
    loaded, key = _key(project)
    dest = tmp_path / "copy"
    stage_repo_workspace(project, dest, exclude=key, only=only)
    assert (dest / "src" / "app.py").is_file() and (dest / ".gitignore").is_file()
    assert not (dest / ".env").exists() and not (dest / "build").exists()
    assert project_files(tmp_path / "not-a-repo-at-all", path_var=os.environ["PATH"]) is None
