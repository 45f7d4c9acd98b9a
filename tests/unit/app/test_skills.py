"""Which `/name` the sandbox's CLI resolves (app/skills.py), as measured on Claude Code 2.1.332."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from agent_eval_sandbox.app.claude_cli import BUILTIN_COMMANDS, MEASURED_VERSION
from agent_eval_sandbox.app.skills import (
    check_skill,
    command_catalog,
    frontmatter_name,
    named_skills,
)
from agent_eval_sandbox.config.loader import load_eval_config
from agent_eval_sandbox.errors import ConfigError


def _write(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _skill(root: Path, rel_dir: str, name: str | None = None) -> None:
    head = f"name: {name}\n" if name else ""
    _write(root, f"{rel_dir}/SKILL.md", f"---\n{head}description: d\n---\nbody\n")


def _catalog(root: Path, extra: str = "", claude_version: str | None = None):
    path = _write(root, "eval.yaml", f"execution: {{skill: x}}\ndataset: {{path: cases}}\n{extra}")
    loaded = load_eval_config(path)
    return loaded, command_catalog(loaded.config, loaded.paths, claude_version=claude_version)


def _resolves(catalog, name: str) -> bool:
    return catalog.find(name) is not None


def test_project_skills_by_directory_and_frontmatter_name(tmp_path):
    _skill(tmp_path, ".claude/skills/alpha", name="alpha-named")
    _skill(tmp_path, ".claude/skills/beta")
    _skill(tmp_path, ".claude/skills/nested/inner")  # deeper directories are not skills
    _write(tmp_path, ".claude/skills/empty/README.md", "no SKILL.md here\n")
    _, catalog = _catalog(tmp_path)
    assert all(_resolves(catalog, n) for n in ("alpha", "alpha-named", "beta"))
    assert not any(_resolves(catalog, n) for n in ("inner", "nested:inner", "nested", "empty"))
    assert catalog.find("alpha-named").origin == ".claude/skills/alpha/SKILL.md"


def test_project_commands_nested_join_with_a_colon(tmp_path):
    _write(tmp_path, ".claude/commands/gamma.md", "gamma\n")
    _write(tmp_path, ".claude/commands/sub/delta.md", "delta\n")
    _, catalog = _catalog(tmp_path)
    assert _resolves(catalog, "gamma") and _resolves(catalog, "sub:delta")
    assert not _resolves(catalog, "delta")


def test_plugin_skills_and_commands_are_prefixed_with_the_plugin_name(tmp_path):
    plugin = tmp_path / "myplug"
    _write(plugin, ".claude-plugin/plugin.json", json.dumps({"name": "renamed"}))
    _skill(plugin, "skills/zeta-dir", name="zeta")
    _skill(plugin, "skills/theta")
    _write(plugin, "commands/eta.md", "eta\n")
    bare = tmp_path / "bare"  # no manifest: named after its directory
    _skill(bare, "skills/iota")
    _, catalog = _catalog(tmp_path, "runner: {plugin_dirs: [./myplug, bare]}\n")
    resolved = ["renamed:zeta-dir", "renamed:zeta", "zeta", "renamed:theta", "renamed:eta", "bare:iota"]
    assert all(_resolves(catalog, n) for n in resolved)
    # measured: the directory name of a plugin with a manifest, and bare directory or command names, do not resolve
    assert not any(_resolves(catalog, n) for n in ("myplug:zeta-dir", "zeta-dir", "theta", "eta", "iota"))


def test_a_manifest_may_add_skill_and_command_paths(tmp_path):
    plugin = tmp_path / "p"
    _write(plugin, ".claude-plugin/plugin.json",
           json.dumps({"name": "p", "skills": ["./extra/one"], "commands": "./more/cmd.md"}))
    _skill(plugin, "extra/one")
    _write(plugin, "more/cmd.md", "x\n")
    _, catalog = _catalog(tmp_path, "runner: {plugin_dirs: [p]}\n")
    assert _resolves(catalog, "p:one") and _resolves(catalog, "p:cmd")


def test_builtins_resolve_and_are_the_measured_version():
    assert MEASURED_VERSION == "2.1.332"
    assert {"clear", "compact", "init", "code-review", "security-review"} <= BUILTIN_COMMANDS


def test_frontmatter_name_tolerates_junk(tmp_path):
    assert frontmatter_name(_write(tmp_path, "a.md", "---\nname: [unclosed\n---\n")) is None
    assert frontmatter_name(_write(tmp_path, "b.md", "no frontmatter\nname: x\n")) is None
    assert frontmatter_name(_write(tmp_path, "c.md", "---\nname: 5\n---\n")) is None
    assert frontmatter_name(_write(tmp_path, "d.md", "---\nname: ' spaced '\n---\n")) == "spaced"
    assert frontmatter_name(tmp_path / "missing.md") is None


def _check(tmp_path, skill, extra="", claude_version=None, home=None):
    loaded, catalog = _catalog(tmp_path, extra, claude_version)
    return check_skill(catalog, skill, field="execution.skill", project_root=loaded.root, config_path=loaded.path,
                       home=home)


def test_a_found_skill_says_where_it_is(tmp_path):
    _skill(tmp_path, ".claude/skills/greeter")
    found, warning = _check(tmp_path, "greeter")
    assert found.origin == ".claude/skills/greeter/SKILL.md" and warning is None
    found, _ = _check(tmp_path, "compact")
    assert found.origin == "built into Claude Code 2.1.332"


def test_a_missing_skill_is_one_error_naming_the_field_and_what_exists(tmp_path):
    _skill(tmp_path, ".claude/skills/summarizer")
    _write(tmp_path, ".claude/commands/report.md", "x\n")
    with pytest.raises(ConfigError) as caught:
        _check(tmp_path, "summariser")
    text = caught.value.render()
    assert caught.value.field == "execution.skill" and str(tmp_path / "eval.yaml") in text
    assert "no skill or command '/summariser' in the sandbox (did you mean 'summarizer'?)" in text
    assert f"found summarizer, report and {len(BUILTIN_COMMANDS)} built-in commands" in text
    assert "create .claude/skills/summariser/SKILL.md" in text and "\n" not in text


def test_a_skill_only_in_the_projects_skills_dir_is_refused_with_the_way_out(tmp_path):
    _skill(tmp_path, "skills/epsilon")
    with pytest.raises(ConfigError, match="Claude Code does not load skills from skills/: move it to "
                                          r"\.claude/skills/epsilon/"):
        _check(tmp_path, "epsilon")


@pytest.mark.parametrize("rel", [".claude/skills/mine/SKILL.md", ".claude/commands/mine.md"])
def test_a_skill_only_in_the_users_home_is_refused_with_the_way_out(tmp_path, rel):
    home = tmp_path / "home"
    _write(home, rel, "---\ndescription: d\n---\nx\n")
    project = tmp_path / "project"
    with pytest.raises(ConfigError, match="it is in your ~/.claude, but the sandbox has a home of its own: copy it "
                                          f"into {project / '.claude'}/"):
        _check(project, "mine", home=home)


def test_symbolic_links_are_not_skills_since_staging_never_copies_them(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    _skill(elsewhere, "linked")
    _skill(elsewhere, "file-target")
    _write(elsewhere, "cmd.md", "x\n")
    project = tmp_path / "project"
    (project / ".claude/skills").mkdir(parents=True)
    (project / ".claude/skills/linked").symlink_to(elsewhere / "linked")
    (project / ".claude/skills/by-file").mkdir()
    (project / ".claude/skills/by-file/SKILL.md").symlink_to(elsewhere / "file-target/SKILL.md")
    (project / ".claude/commands").mkdir()
    (project / ".claude/commands/cmd.md").symlink_to(elsewhere / "cmd.md")
    _skill(project, ".claude/skills/real")
    _, catalog = _catalog(project)
    assert catalog.own_names == ["real"]
    with pytest.raises(ConfigError, match=r"\.claude/skills/linked is \(or passes through\) a symbolic link, which is "
                                          "never copied into the sandbox"):
        _check(project, "linked")


def test_a_symlinked_plugin_skills_dir_is_not_copied(tmp_path):
    _skill(tmp_path / "real-skills", "zeta")
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug/skills").symlink_to(tmp_path / "real-skills")
    _, catalog = _catalog(tmp_path, "runner: {plugin_dirs: [plug]}\n")
    assert catalog.own_names == []


def test_a_leading_slash_is_named(tmp_path):
    _skill(tmp_path, ".claude/skills/greeter")
    with pytest.raises(ConfigError, match="the runner adds the slash itself — write execution.skill: greeter"):
        _check(tmp_path, "/greeter")


def test_another_claude_version_turns_the_refusal_into_a_warning(tmp_path):
    found, warning = _check(tmp_path, "some-new-builtin", claude_version="2.2.0")
    assert found is None
    assert "no skill or command '/some-new-builtin'" in warning and "the sandbox runs 2.2.0" in warning
    found, warning = _check(tmp_path, "some-new-builtin", extra="sandbox: {claude_version: 2.2.0}\n")
    assert found is None and warning


def test_a_missing_plugin_dir_is_left_to_the_run(tmp_path):
    _, catalog = _catalog(tmp_path, "runner: {plugin_dirs: [./nowhere]}\n")
    assert catalog.own_names == []


def test_named_skills_prompt_mode_and_the_steps_hook(tmp_path):
    loaded = load_eval_config(_write(tmp_path, "eval.yaml", "execution: {prompt: hi}\n"))
    assert named_skills(loaded.config) == []
    loaded = load_eval_config(_write(tmp_path, "eval.yaml", "execution: {skill: s}\n"))
    assert named_skills(loaded.config) == [("execution.skill", "s")]
    # each step's skill is checked under its own field
    loaded = load_eval_config(_write(tmp_path, "eval.yaml", (
        "execution:\n  steps:\n    - {id: one, skill: a}\n    - {id: two, prompt: p}\n    - {id: three, skill: b}\n")))
    assert named_skills(loaded.config) == [("execution.steps[0].skill", "a"), ("execution.steps[2].skill", "b")]
