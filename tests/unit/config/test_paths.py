"""config/paths.py: the containment rules and where each path-valued field resolves."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from agent_eval_sandbox.app.validate import load_checked
from agent_eval_sandbox.config import paths
from agent_eval_sandbox.config.paths import ProjectPaths
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.judges.prompt import compile_prompt
from agent_eval_sandbox.runner.answer_key import answer_key


@pytest.mark.parametrize(
    ("path", "rule", "problem"),
    [
        ("a/b", {}, None),
        ("./a//b/", {}, None),
        ("a/../b", {}, None),
        ("a/../../b", {}, "climb out"),
        ("..", {}, "climb out"),
        ("/etc/passwd", {}, "absolute paths are refused"),
        ("~/x", {"allow_absolute": True}, "absolute paths are refused"),
        ("C:\\x", {}, "absolute paths are refused"),
        ("\\\\server\\share", {}, "absolute paths are refused"),
        ("/shared/data", {"allow_absolute": True}, None),
        ("a/../b", {"no_parent": True}, "must not contain '..'"),
        ("a\\..\\b", {"no_parent": True}, "must not contain '..'"),
        (".", {"reject_root": True}, "not the directory itself"),
        ("a/..", {"reject_root": True}, "not the directory itself"),
        ("", {}, "must not be empty"),
        ("a\x00b", {}, "NUL"),
    ],
)
def test_relative_problem(path, rule, problem):
    found = paths.relative_problem(path, **rule)
    assert (found is None) if problem is None else (found is not None and problem in found), found


@pytest.mark.parametrize("name", ["greeter", "rfe.create", "my-plugin:review", "team/skill"])
def test_skill_names_that_are_names(name):
    assert paths.skill_name_problem(name) is None


@pytest.mark.parametrize(("name", "problem"), [
    ("/greeter", "without the leading '/'"),
    ("../../etc", "no '..'"),
    ("a/../../b", "no '..'"),
    ("my skill", "without spaces"),
    ("a\\b", "backslashes"),
    ("x\ny", "control characters"),
    ("~/x", "not a path"),
])
def test_skill_names_that_are_paths_out(name, problem):
    assert problem in (paths.skill_name_problem(name) or "")


@pytest.mark.parametrize(("module", "ok"), [
    ("eval.judges.quality", True), ("grade", True), ("../grade", False), ("eval/judges/q.py", False),
    (".grade", False), ("a..b", False), ("", False),
])
def test_module_names(module, ok):
    assert (paths.module_name_problem(module) is None) is ok


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))


def test_project_file_prefers_the_working_directory_then_eval_yaml_dir(tmp_path):
    repo, config_dir = tmp_path / "repo", tmp_path / "repo" / "eval"
    _write(repo, {"eval/prompts/a.md": "from workdir", "eval/eval/prompts/a.md": "from config dir",
                  "eval/only-here.md": "config dir only"})
    where = ProjectPaths(config_dir=config_dir, workdir=repo)
    assert where.project_file("eval/prompts/a.md") == repo / "eval/prompts/a.md"
    assert where.project_file("only-here.md") == config_dir / "only-here.md"
    assert where.project_file("missing.md") == config_dir / "missing.md"  # errors name the project's path
    assert where.project_file("/abs/x.md") == Path("/abs/x.md")
    assert where.project_file_candidates("p.md") == [repo / "p.md", config_dir / "p.md"]
    assert ProjectPaths(config_dir, config_dir).project_file_candidates("p.md") == [config_dir / "p.md"]


def test_the_working_directory_counts_only_when_eval_yaml_is_inside_it(tmp_path):
    """Run from elsewhere — say inside a run directory, among the agent's files — the working
    directory supplies nothing: a planted prompts/judge.md there is not the judge's prompt."""
    project, run_case = tmp_path / "project", tmp_path / "project" / "eval" / "runs" / "r1" / "cases" / "c1"
    _write(project, {"prompts/judge.md": "the project's", "eval/runs/r1/cases/c1/prompts/judge.md": "planted"})
    inside_run = ProjectPaths(config_dir=project, workdir=run_case)
    assert inside_run.project_file("prompts/judge.md") == project / "prompts/judge.md"
    assert inside_run.project_file_candidates("prompts/judge.md") == [project / "prompts/judge.md"]
    elsewhere = ProjectPaths(config_dir=project, workdir=tmp_path / "other")
    assert elsewhere.project_file_candidates("x") == [project / "x"]


def test_dataset_dir_is_relative_to_eval_yaml_not_the_working_directory(tmp_path):
    where = ProjectPaths(config_dir=tmp_path / "eval", workdir=tmp_path)
    assert where.dataset_dir("cases") == tmp_path / "eval" / "cases"
    assert where.dataset_dir("") == tmp_path / "eval"
    assert where.dataset_dir("/shared/cases") == Path("/shared/cases")


def test_tool_and_seed_prompt_files_are_relative_to_eval_yaml(tmp_path):
    where = ProjectPaths(config_dir=tmp_path / "eval", workdir=tmp_path)
    assert where.tool_prompt_file("prompts/ask.md") == tmp_path / "eval" / "prompts/ask.md"
    assert where.seed_prompt_file("prompts/seed.md") == tmp_path / "eval" / "prompts/seed.md"


def test_plugin_dirs_resolve_from_the_working_directory_then_eval_yaml_dir(tmp_path):
    repo = tmp_path / "repo"
    _write(repo, {"plugins/a/x": "", "eval/plugins/b/x": ""})
    where = ProjectPaths(config_dir=repo / "eval", workdir=repo)
    assert where.plugin_dir("plugins/a") == repo / "plugins/a"
    assert where.plugin_dir("plugins/b") == repo / "eval/plugins/b"
    assert where.plugin_dir("../outside") == tmp_path / "repo" / "outside"  # lexically external: an opt-in


def test_a_plugin_dir_inside_the_project_may_not_leave_it_through_a_symlink(tmp_path):
    outside = tmp_path / "home" / ".ssh"
    outside.mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    os.symlink(outside, project / "plugin")
    with pytest.raises(ConfigError, match="symlink takes it to"):
        ProjectPaths(project, project).plugin_dir("plugin")
    # Named by its real, absolute path it is an explicit opt-in, as in the reference.
    assert ProjectPaths(project, project).plugin_dir(str(outside)) == outside


def test_real_layout_eval_in_a_subdirectory_run_from_the_repository_root(tmp_path, monkeypatch):
    """The reference's users run from their repository root with eval/eval.yaml naming
    eval/prompts/judge.md: that loads, the judge reads it, and it is in the answer key."""
    repo = tmp_path / "repo"
    _write(repo, {
        "eval/eval.yaml": """
            execution: {skill: s, arguments: "{prompt}"}
            models: {judge: m}
            dataset: {path: dataset/cases}
            judges:
              - name: quality
                prompt_file: eval/prompts/judge.md
                context: [eval/prompts/guide.md]
                score_range: [1, 5]
        """,
        "eval/prompts/judge.md": "Judge {{ outputs }}",
        "eval/prompts/guide.md": "The guide",
        "eval/dataset/cases/c1/input.yaml": "prompt: hi\n",
    })
    monkeypatch.chdir(repo)
    loaded = load_checked(Path("eval/eval.yaml"))
    assert loaded.dataset_dir == repo / "eval" / "dataset" / "cases"
    judge = loaded.config.judges[0]
    assert compile_prompt(judge, loaded.paths).startswith("Judge {{ outputs }}\n\n## Context: guide.md\n\nThe guide")
    key = answer_key(loaded, runs_base=repo / "eval" / "runs")
    assert key.covers(repo / "eval" / "prompts" / "judge.md") and key.covers(repo / "eval" / "prompts" / "guide.md")


def test_the_same_eval_run_from_its_own_directory_finds_files_beside_eval_yaml(tmp_path, monkeypatch):
    _write(tmp_path, {
        "eval.yaml": "models: {judge: m}\njudges: [{name: q, prompt_file: prompts/judge.md, score_range: [1, 5]}]\n",
        "prompts/judge.md": "Judge",
    })
    monkeypatch.chdir(tmp_path.parent)  # somewhere else entirely: the file beside eval.yaml still counts
    loaded = load_checked(tmp_path / "eval.yaml")
    assert compile_prompt(loaded.config.judges[0], loaded.paths) == "Judge"


def test_a_missing_judge_prompt_file_names_the_judge_and_both_bases(tmp_path, monkeypatch):
    _write(tmp_path, {"eval.yaml": "models: {judge: m}\njudges: [{name: q, prompt_file: nope.md}]\n"})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_checked(tmp_path / "eval.yaml")
    text = str(info.value)
    assert "judges[0].prompt_file (judge 'q')" in text and "working directory" in text
