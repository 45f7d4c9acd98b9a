from __future__ import annotations

import pytest

from agent_eval_sandbox.runner.changes import CollectionInterrupted, compare, unified_diff
from agent_eval_sandbox.runner.collect import collect_changes


def test_added_modified_deleted_and_scaffolding_ignored(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    for root in (before, after):
        (root / "src").mkdir(parents=True)
        (root / "same.txt").write_text("same\n")
    (before / "src" / "edit.py").write_text("a = 1\n")
    (after / "src" / "edit.py").write_text("a = 2\n")
    (before / "gone.txt").write_text("bye\n")
    (after / "new.txt").write_text("hi")
    (after / ".claude").mkdir()
    (after / ".claude" / "settings.json").write_text("{}")
    (after / ".hook-outputs.yaml").write_text("env: {}")
    changes = compare(before, after)
    assert changes.added == ["new.txt"]
    assert changes.modified == ["src/edit.py"]
    assert changes.deleted == ["gone.txt"]
    diff = unified_diff(before, after, changes)
    assert "--- a/src/edit.py" in diff and "+a = 2" in diff and "-a = 1" in diff
    assert "+++ /dev/null" in diff and "--- /dev/null" in diff
    assert "\\ No newline at end of file" in diff


def test_binary_files_summarised(tmp_path):
    before, after = tmp_path / "b", tmp_path / "a"
    before.mkdir(), after.mkdir()
    (before / "x.bin").write_bytes(b"\0\1")
    (after / "x.bin").write_bytes(b"\0\2")
    changes = compare(before, after)
    assert "Binary or large file x.bin changed" in unified_diff(before, after, changes)


def test_symlinks_in_after_are_not_followed(tmp_path):
    before, after = tmp_path / "b", tmp_path / "a"
    before.mkdir(), after.mkdir()
    (tmp_path / "secret").write_text("s")
    (after / "link").symlink_to(tmp_path / "secret")
    assert compare(before, after).added == []


def test_the_diff_is_capped_and_names_what_it_left_out(tmp_path):
    before, after = tmp_path / "a", tmp_path / "b"
    before.mkdir()
    after.mkdir()
    for i in range(5):
        (after / f"f{i}.txt").write_text("x\n" * 100)
    changes = compare(before, after)
    diff = unified_diff(before, after, changes, max_bytes=700)
    assert len(diff) < 700 + 200
    assert "diff truncated" in diff and "more changed file(s) not shown" in diff
    assert "+++ b/f0.txt" in diff and "f4.txt" not in diff


def test_names_that_are_not_utf8_are_carried_through(tmp_path):
    import os

    before, after, case = tmp_path / "a", tmp_path / "b", tmp_path / "case"
    before.mkdir()
    after.mkdir()
    case.mkdir()
    name = os.fsdecode(b"notes-\xff.txt")
    (after / name).write_text("hi\n")
    changes = collect_changes(before, after, case)
    assert changes.added == [name]
    assert b"notes-\xff.txt" in (case / "workspace.diff").read_bytes()
    assert (case / "_modified" / name).read_text() == "hi\n"


def test_git_metadata_is_no_change(tmp_path):
    """A repo-mode workspace starts with a host-made .git that is never collected back."""
    before, after = tmp_path / "before", tmp_path / "after"
    (before / ".git" / "objects").mkdir(parents=True)
    (before / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (before / "a.txt").write_text("a\n")
    (after / "sub").mkdir(parents=True)
    (after / "a.txt").write_text("a\n")
    (after / "sub" / ".git").write_text("gitdir: ../x\n")
    changes = compare(before, after)
    assert changes.as_dict() == {"added": [], "modified": [], "deleted": []}


def test_mounted_resources_are_not_the_agents_changes(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    before.mkdir()
    (after / "scripts").mkdir(parents=True)
    (after / "scripts" / "helper.sh").write_text("echo\n")
    (after / "CLAUDE.md").write_text("# project\n")
    (after / "scriptsx.txt").write_text("the agent's\n")
    changes = compare(before, after, mounted=("scripts", "CLAUDE.md"))
    assert changes.added == ["scriptsx.txt"]


INJECTED_NAME = (
    "z\n"
    "diff --git a/eval.yaml b/eval.yaml\n--- a/eval.yaml\n+++ b/eval.yaml\n@@ -1,3 +1,3 @@\n"
    "-name: victim\n+name: pwned-by-the-agent\n execution:\n   mode: case\n"
    "diff --git a/run-me.sh b/run-me.sh\nnew file mode 100755\n--- /dev/null\n+++ b/run-me.sh\n"
    "@@ -0,0 +1 @@\n+echo agent code\n"
    "diff --git a/q b/q\nnew file mode 100644\n--- /dev/null\n+++ b/q"
)


def test_a_file_name_cannot_spell_diff_lines_of_its_own(tmp_path):
    """Found by the red team: a name holding line breaks put hunks for eval.yaml and a new
    executable into workspace.diff, and `git apply` took them. Names are quoted as git does."""
    import subprocess

    before, after, case = tmp_path / "before", tmp_path / "after", tmp_path / "case"
    for root in (before, after):
        (root / "src").mkdir(parents=True)
        (root / "src" / "calc.py").write_text("x = 1\n")
    (after / "src" / "calc.py").write_text("x = 1\n# changed\n")
    directory, name = INJECTED_NAME.rsplit("/", 1)
    (after / directory).mkdir(parents=True)
    (after / directory / name).write_text("innocent\n")
    case.mkdir()
    collect_changes(before, after, case)
    diff = (case / "workspace.diff").read_text()
    assert "\n+++ b/eval.yaml" not in diff and "run-me.sh" in diff  # only inside one quoted name
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "eval.yaml").write_text("name: victim\nexecution:\n  mode: case\n")
    (project / "src" / "calc.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    applied = subprocess.run(["git", "apply", "--unsafe-paths", str(case / "workspace.diff")], cwd=project,
                             capture_output=True, text=True)
    assert (project / "eval.yaml").read_text().startswith("name: victim")
    assert not (project / "run-me.sh").exists()
    assert applied.returncode == 0, applied.stderr
    assert (project / "src" / "calc.py").read_text().endswith("# changed\n")


class StopAfter:
    """A run's cancel event that turns set after `checks` looks at it (Ctrl-C part-way through a loop)."""

    def __init__(self, checks: int) -> None:
        self.left = checks

    def is_set(self) -> bool:
        self.left -= 1
        return self.left < 0


def _many_added(tmp_path, count: int):
    before, after, case = tmp_path / "before", tmp_path / "after", tmp_path / "case"
    before.mkdir()
    (after / "many").mkdir(parents=True)
    case.mkdir()
    for i in range(count):
        (after / "many" / f"f{i:03}.txt").write_text(f"{i}\n")
    return before, after, case


def test_an_interrupted_run_stops_comparing_the_workspace(tmp_path):
    before, after, _ = _many_added(tmp_path, 10)
    with pytest.raises(CollectionInterrupted, match="stopped while comparing the workspace: the run was interrupted") \
            as stopped:
        compare(before, after, stop=StopAfter(4))
    assert stopped.value.changes is None  # what it had compared is not the workspace's changes


def test_an_interrupted_run_stops_copying_the_changed_files_and_keeps_the_comparison(tmp_path):
    before, after, case = _many_added(tmp_path, 10)
    # The comparison looks 3 times in its walks (before; after, many), then once a name (10).
    stop = StopAfter(3 + 10 + 4)
    with pytest.raises(CollectionInterrupted, match="stopped after copying 4 of 10 changed files") as stopped:
        collect_changes(before, after, case, stop=stop)
    assert stopped.value.changes is not None and len(stopped.value.changes.added) == 10
    assert sorted(p.name for p in (case / "_modified" / "many").iterdir()) == [f"f{i:03}.txt" for i in range(4)]
    assert not (case / "workspace.diff").exists()


def test_an_interrupted_diff_ends_in_a_note_that_says_so(tmp_path):
    before, after, case = _many_added(tmp_path, 10)
    stop = StopAfter(3 + 10 + 10 + 6)  # compared, all 10 copied, 6 files into the diff
    with pytest.raises(CollectionInterrupted, match="after the diff of 6 of 10 changed files") as stopped:
        collect_changes(before, after, case, stop=stop)
    assert len(stopped.value.changes.added) == 10
    diff = (case / "workspace.diff").read_text()
    assert "+++ b/many/f005.txt" in diff and "f006.txt" not in diff
    assert diff.endswith("[agent-eval-sandbox: diff stopped: the run was interrupted; "
                         "4 more changed file(s) not shown]\n")


def test_a_run_not_interrupted_collects_everything(tmp_path):
    before, after, case = _many_added(tmp_path, 10)
    changes = collect_changes(before, after, case, stop=StopAfter(10_000))
    assert len(changes.added) == 10 and len(list((case / "_modified" / "many").iterdir())) == 10
    assert "stopped" not in (case / "workspace.diff").read_text()
