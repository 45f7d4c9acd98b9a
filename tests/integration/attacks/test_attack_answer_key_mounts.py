"""The answer key hidden among the project resources the sandbox mounts.

The project keeps its judge code, judge prompts, an interception prompt and a
host hook's script inside the very directories that are mounted into every
workspace (`scripts/`, `.context/`, `skills/`), next to files the skill does
need. The agent searches /workspace for the needle every one of them holds
and must find none of them, while the skill's own files and a container-scope
hook's script are still there. A second eval runs `workspace_mode: repo` on a
project with a git history full of answer keys: the sandbox gets a one-commit
history of the cleaned tree, and nothing in it holds a needle.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.e2e.conftest import EvalProject

from .conftest import (
    NEEDLE,
    SHELL_NEEDLE,
    AttackRun,
    all_case_text,
    bash,
    final,
    make_project,
    read,
    record_fact,
    run_attack,
    tagged,
    write_eval,
)

pytestmark = pytest.mark.docker


def key(name: str) -> str:
    return f"{NEEDLE}-{name}"


# Every file under /workspace (python: coreutils' find fails under gVisor 2022), then every
# way of reading them: grep, cat, python open().
LIST = "import os\nfor r, d, f in os.walk('/workspace'):\n    [print('@@file', os.path.join(r, n)) for n in f]\n"
PY_SCAN = (
    "import os, sys\nn = sys.argv[1].encode()\nhits = 0\n"
    "for r, d, f in os.walk('/workspace'):\n"
    "    for name in f:\n"
    "        try:\n"
    "            hits += n in open(os.path.join(r, name), 'rb').read()\n"
    "        except OSError:\n"
    "            pass\n"
    "print('@@py-hits', hits)\n"
)
SEARCH = (
    f"python3 -c {shlex.quote(LIST)};"
    f" grep -r -a -l -s {SHELL_NEEDLE} /workspace | sed 's/^/@@grep /';"
    " python3 -c \"import os; [print(os.path.join(r, n)) for r, d, f in os.walk('/workspace') for n in f]\""
    f" | while read -r p; do cat \"$p\"; done | grep -a -c {SHELL_NEEDLE} | sed 's/^/@@cat-hits /';"
    f" python3 -c {shlex.quote(PY_SCAN)} {SHELL_NEEDLE}"
)

# ---- case mode: resources mounted into every workspace --------------------------------------

# What the skill needs: mounted as before.
KEPT = ("scripts/helper.sh", "scripts/hooks/in_box.sh", "scripts/hooks/shared.sh", ".context/notes.md",
        "skills/real/SKILL.md", ".claude/skills/scribe/SKILL.md")
# The answer key inside those directories: left out.
GONE = ("scripts/grade.py", "scripts/grade_helpers.py", "scripts/hooks/host_check.sh", ".context/rubric.md",
        ".context/guide.md", "skills/answers/prompt.md", "skills/model_script.yaml")


@pytest.fixture(scope="module")
def mounts_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = make_project(tmp_path_factory, "mounts", runtime)
    write_eval(project, """
        name: attack-mounts
        execution: {prompt: "{q}", timeout: 300}
        models: {skill: claude-sonnet-4-6, judge: claude-sonnet-4-6}
        runner: {permission_mode: bypassPermissions}
        dataset: {path: cases}
        outputs: [{path: out}]
        inputs:
          tools:
            - match: AskUserQuestion
              prompt_file: skills/answers/prompt.md
        hooks:
          before_all:
            - command: bash scripts/hooks/host_check.sh
            - command: bash scripts/hooks/shared.sh host
          before_each:
            - scope: container
              command: bash scripts/hooks/in_box.sh
            - scope: container
              command: bash scripts/hooks/shared.sh container
        judges:
          - name: module_judge
            module: scripts.grade
            function: score
          - name: rubric
            prompt_file: .context/rubric.md
            context: [.context/guide.md]
            feedback_type: bool
    """, runtime)
    project.write("CLAUDE.md", "Be brief.\n")
    project.write(".claude/skills/scribe/SKILL.md", "---\nname: scribe\ndescription: d\n---\nDo it.\n")
    project.write("scripts/helper.sh", "echo helping\n")
    project.write("scripts/grade.py", f"from scripts.grade_helpers import verdict\nSECRET = {key('module')!r}\n\n"
                  "def score(outputs):\n    return verdict(), 'graded on the host'\n")
    project.write("scripts/grade_helpers.py", f"EXPECTED = {key('helper')!r}\n\ndef verdict():\n    return True\n")
    project.write("scripts/hooks/host_check.sh", f"# {key('host-hook')}\necho host check ok\n")
    project.write("scripts/hooks/in_box.sh", "echo in box ok\n")
    project.write("scripts/hooks/shared.sh", "echo \"shared hook ok ($1)\"\n")
    project.write(".context/rubric.md", f"Pass when the answer is {key('prompt-file')}.\n{{{{ conversation }}}}\n")
    project.write(".context/guide.md", f"{key('context')}\n")
    project.write(".context/notes.md", "notes the skill reads\n")
    project.write("skills/answers/prompt.md", f"Answer {key('handler-prompt')}\n")
    project.write("skills/real/SKILL.md", "---\nname: real\ndescription: d\n---\nReal.\n")
    project.write("skills/model_script.yaml", f"# {key('stray-model-script')}\n- text: hi\n")
    project.write("judge_script.yaml", yaml.safe_dump([{"tool": "submit_score",
                                                         "input": {"score": True, "rationale": "ok"}}]))
    project.case("c1", {"q": "search"}, script=[bash(SEARCH, timeout_ms=300_000), final("searched")])
    return run_attack(project, runtime, "mounts", "--offline")


def test_no_answer_key_file_is_mounted(mounts_run: AttackRun) -> None:
    output = mounts_run.output("c1")
    files = {line.removeprefix("/workspace/") for line in tagged(output, "file")}
    for rel in KEPT:
        assert rel in files, (rel, sorted(files))
    for rel in GONE:
        assert rel not in files, rel
    assert NEEDLE not in output
    assert tagged(output, "grep") == []
    assert tagged(output, "cat-hits") == ["0"] and tagged(output, "py-hits") == ["0"]
    record_fact("answer key in mounts: files searched inside, needle hits 0", mounts_run.runtime, len(files), "files")


def test_the_user_is_told_what_was_left_out(mounts_run: AttackRun) -> None:
    warnings = [line for line in mounts_run.result.process.stderr.splitlines() if "left out of the sandbox" in line]
    assert len(warnings) == 1, mounts_run.result.process.stderr[-3000:]
    for rel in GONE:
        assert rel in warnings[0], (rel, warnings[0])
    for rel in KEPT:
        assert rel not in warnings[0], (rel, warnings[0])


def test_hooks_and_judges_still_run_from_the_project(mounts_run: AttackRun) -> None:
    run_dir = mounts_run.result.run_dir
    assert run_dir is not None
    logs = {p.name: p.read_text() for p in (run_dir / "hooks").iterdir()}
    assert "host check ok" in logs["before_all.0.log"]
    assert "shared hook ok (host)" in logs["before_all.1.log"]
    assert "in box ok" in logs["before_each.c1.0.log"]
    assert "shared hook ok (container)" in logs["before_each.c1.1.log"]
    summary = yaml.safe_load((run_dir / "summary.yaml").read_text())
    assert summary["per_case"]["c1"]["module_judge"]["value"] is True, summary["per_case"]["c1"]
    assert NEEDLE not in all_case_text(mounts_run.result.case("c1"))


# ---- repo mode: the project's history ------------------------------------------------------


def _git(project: Path, *args: str) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(project.parent), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    subprocess.run(["git", "-C", str(project), *args], check=True, env=env, capture_output=True)


GIT_SEARCH = "; ".join([
    "cd /workspace",
    "echo \"@@commits $(git rev-list --all | wc -l)\"",
    "git log --all --format='%H %s' | sed 's/^/@@log /'",
    "git ls-files | sed 's/^/@@tracked /'",
    "git show HEAD:eval.yaml >/dev/null 2>&1; echo \"@@show-eval rc=$?\"",
    f"git log --all -p | grep -a -c {SHELL_NEEDLE} | sed 's/^/@@log-hits /'",
    f"git cat-file --batch-all-objects --batch | grep -a -c {SHELL_NEEDLE} | sed 's/^/@@object-hits /'",
    "echo \"@@objects $(git cat-file --batch-all-objects --batch-check | wc -l)\"",
    "python3 -c \"import os; [print('@@gitfile', os.path.join(r, n)) for r, d, f in os.walk('.git') for n in f]\"",
])
# Every file under .git, raw and zlib-inflated (loose objects), for the needle.
GIT_INFLATE = (
    "import os, sys, zlib\nn = sys.argv[1].encode()\nhits = files = 0\n"
    "for r, d, f in os.walk('/workspace/.git'):\n"
    "    for name in f:\n"
    "        data = open(os.path.join(r, name), 'rb').read()\n"
    "        files += 1\n"
    "        try:\n"
    "            data += zlib.decompress(data)\n"
    "        except zlib.error:\n"
    "            pass\n"
    "        hits += n in data\n"
    "print('@@inflate', files, hits)\n"
)


@pytest.fixture(scope="module")
def repo_history_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project: EvalProject = make_project(tmp_path_factory, "repohist", runtime)
    write_eval(project, f"""
        # {key('eval-yaml')}
        name: attack-repo-history
        execution: {{prompt: "{{q}}", timeout: 300}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{workspace_mode: repo, permission_mode: bypassPermissions}}
        dataset: {{path: eval/cases}}
        judges:
          - name: module_judge
            module: judges.secret_judge
            function: score
    """, runtime)
    project.write("judges/__init__.py", "")
    project.write("judges/secret_judge.py",
                  f"SECRET = {key('judge')!r}\n\ndef score(outputs):\n    return True, 'ok'\n")
    project.write("src/app.py", "VERSION = 'old'\n")
    steps: list[dict[str, Any]] = [bash(GIT_SEARCH, timeout_ms=300_000),
                                   bash(f"python3 -c {shlex.quote(GIT_INFLATE)} {SHELL_NEEDLE}"),
                                   read("/workspace/eval.yaml"), final("searched")]
    for case_id in ("c1", "c2"):
        case = project.root / "eval" / "cases" / case_id
        case.mkdir(parents=True)
        (case / "input.yaml").write_text(f"q: {'update it' if case_id == 'c1' else key('other-input')}\n")
        (case / "annotations.yaml").write_text(f"expected: {key(case_id + '-annotations')}\n")
        (case / "model_script.yaml").write_text(yaml.safe_dump(steps if case_id == "c1" else [final("idle")]))
    # The history holds all of it, on a branch and a tag too; the runs dir is ignored.
    project.write(".gitignore", "runs/\n")
    _git(project.root, "init", "-q")
    _git(project.root, "add", "-A")
    _git(project.root, "commit", "-q", "-m", "first")
    _git(project.root, "tag", "v1")
    project.write("notes.md", f"{key('second-commit')}\n")
    _git(project.root, "checkout", "-q", "-b", "side")
    _git(project.root, "add", "-A")
    _git(project.root, "commit", "-q", "-m", "second")
    _git(project.root, "gc", "-q")  # packed objects, not only loose ones
    project.write("notes.md", "public notes\n")  # the working tree no longer holds this one
    return run_attack(project, runtime, "repo-history", "--offline")


def test_the_sandbox_history_is_one_commit_of_the_cleaned_tree(repo_history_run: AttackRun) -> None:
    output = repo_history_run.output("c1")
    assert tagged(output, "commits") == ["1"], output[-3000:]
    assert len(tagged(output, "log")) == 1
    tracked = set(tagged(output, "tracked"))
    assert {"src/app.py", "notes.md", ".gitignore"} <= tracked, tracked
    assert not any(t.startswith(("eval/", "judges/")) or t == "eval.yaml" for t in tracked), tracked
    assert tagged(output, "show-eval") != ["rc=0"]


def test_no_needle_anywhere_in_the_sandbox_history(repo_history_run: AttackRun) -> None:
    output = repo_history_run.output("c1")
    assert NEEDLE not in output
    assert tagged(output, "log-hits") == ["0"] and tagged(output, "object-hits") == ["0"]
    assert int(tagged(output, "objects")[0]) > 0  # the control: there are objects to search
    inflated = tagged(output, "inflate")[0].split()
    assert int(inflated[0]) > 0 and inflated[1] == "0", inflated
    record_fact("repo mode: git objects in the sandbox history, needle hits 0", repo_history_run.runtime,
                int(tagged(output, "objects")[0]))
    assert NEEDLE not in all_case_text(repo_history_run.result.case("c1"))
