from __future__ import annotations

import os

import pytest

from agent_eval_sandbox.config.dataset import load_dataset
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.errors import ConfigError
from agent_eval_sandbox.runner.answer_key import AnswerKey
from agent_eval_sandbox.runner.workspace import (
    copy_tree,
    stage_case_workspace,
    stage_project_resources,
    stage_repo_workspace,
)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "cases" / "c1" / "src").mkdir(parents=True)
    (tmp_path / "cases" / "c1" / "input.yaml").write_text("prompt: hi\n")
    (tmp_path / "cases" / "c1" / "answers.yaml").write_text("secret: 42\n")
    (tmp_path / "cases" / "c1" / "reference.md").write_text("gold\n")
    (tmp_path / "cases" / "c1" / "src" / "main.py").write_text("print(1)\n")
    (tmp_path / "cases" / "c1" / "src" / "keys.pem").write_text("k\n")
    (tmp_path / "outside.txt").write_text("host secret\n")
    os.symlink(tmp_path / "outside.txt", tmp_path / "cases" / "c1" / "src" / "escape.txt")
    (tmp_path / "eval.yaml").write_text(
        "execution: {prompt: p}\ndataset: {path: cases, workspace: {files: [src/]}}\noutputs: [{path: out/reports}]\n"
    )
    return tmp_path


def test_case_workspace_holds_only_input_files_and_outputs(project, tmp_path):
    loaded = load_eval_config(project / "eval.yaml")
    case = load_dataset(loaded).cases[0]
    dest = tmp_path / "ws"
    report = stage_case_workspace(loaded.config, case, dest, is_denied=lambda rel: rel.endswith(".pem"))
    present = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
    assert present == ["input.yaml", "out", "out/reports", "src", "src/main.py"]
    skipped = {(entry.path.rsplit("/", 1)[-1], entry.kind) for entry in report.skipped}
    assert skipped == {("escape.txt", "symlink"), ("keys.pem", "denied")}


def test_copy_tree_skips_links_and_devices(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a").write_text("a")
    os.symlink("/etc/passwd", src / "pw")
    os.mkfifo(src / "fifo")
    report = copy_tree(src, tmp_path / "dst")
    assert (tmp_path / "dst" / "a").read_text() == "a"
    assert not (tmp_path / "dst" / "pw").exists() and not (tmp_path / "dst" / "fifo").exists()
    assert report.files == 1 and sorted((s.path, s.kind) for s in report.skipped) == [("fifo", "fifo"), ("pw", "symlink")]


def test_repo_copy_excludes_answer_key_and_git(project, tmp_path):
    (project / "docs").mkdir()
    (project / "docs" / "a.md").write_text("doc")
    (project / ".git" / "objects").mkdir(parents=True)
    (project / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (project / "vendor" / "lib").mkdir(parents=True)
    (project / "vendor" / "lib" / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    dest = tmp_path / "repo-copy"
    report = stage_repo_workspace(project, dest, exclude=AnswerKey.of([project / "eval.yaml", project / "cases"]))
    assert (dest / "docs" / "a.md").exists()
    assert not (dest / "eval.yaml").exists() and not (dest / "cases").exists()
    assert not (dest / ".git").exists() and not (dest / "vendor" / "lib" / ".git").exists()
    assert sorted(p.name for p in report.excluded) == ["cases", "eval.yaml"]


def test_project_resources_and_plugins(project, tmp_path):
    (project / ".claude" / "skills" / "s1").mkdir(parents=True)
    (project / ".claude" / "skills" / "s1" / "SKILL.md").write_text("---\nname: s1\n---\n")
    (project / ".claude" / "settings.local.json").write_text("{}")
    (project / "plug" / ".claude-plugin").mkdir(parents=True)
    (project / "plug" / ".claude-plugin" / "plugin.json").write_text("{}")
    (project / "eval.yaml").write_text("execution: {prompt: p}\nrunner: {plugin_dirs: [plug]}\n")
    loaded = load_eval_config(project / "eval.yaml")
    staged = stage_project_resources(loaded.config, loaded.paths, tmp_path / "stage").resources
    targets = {s.container_path for s in staged}
    assert targets == {"/workspace/.claude/skills", "/workspace/.staged-plugins/plug"}
    assert (tmp_path / "stage" / ".claude" / "skills" / "s1" / "SKILL.md").exists()


def test_missing_plugin_dir_is_config_error(project, tmp_path):
    (project / "eval.yaml").write_text("execution: {prompt: p}\nrunner: {plugin_dirs: [nope]}\n")
    loaded = load_eval_config(project / "eval.yaml")
    with pytest.raises(ConfigError, match="plugin directory 'nope' not found"):
        stage_project_resources(loaded.config, loaded.paths, tmp_path / "stage")
