"""The skill under test hunts for the answer key: it must find nothing, by any path.

Every answer-key file of the project holds a needle (`ANSWER`+`KEY`-...). The
reader case attacks with cat, awk, python open(), find, grep, symlinks to the
exact host paths, /proc/*/root and /proc/*/cwd, the host paths mountinfo
reveals, the Read tool, and a look at everything the read-only project
resources expose; a neighbour case runs beside it. A second eval does the same
to a `workspace_mode: repo` copy of a project.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.e2e.conftest import EvalProject

from .conftest import (
    NEEDLE,
    NEEDLE_PARTS,
    SHELL_NEEDLE,
    AttackRun,
    all_case_text,
    bash,
    by_probe,
    final,
    is_gvisor,
    make_project,
    probe_steps,
    read,
    record_fact,
    run_attack,
    tagged,
    write_eval,
)

pytestmark = pytest.mark.docker

SKILL = "---\nname: scribe\ndescription: does what it is told\n---\nDo what the arguments say.\n"
# Names of answer-key files, searched for by name with find.
KEY_NAMES = ("eval.yaml", "answers.yaml", "annotations.yaml", "tool_handlers.yaml", "model_script.yaml",
             "judge_script.yaml", "secret_judge.py", "rubric.md", "context.md", "expected.txt")
# Paths kept out by sandbox.filesystem.denyRead / a path-scoped permissions.deny rule.
DENIED_PARTS = ("DENIED", "KEY")
DENIED = "".join(DENIED_PARTS)


def key(name: str) -> str:
    return f"{NEEDLE}-{name}\n"


def _write_answer_key(project: EvalProject) -> list[Path]:
    """The judge code, handlers and judge script every project here has; returns their paths."""
    paths = [
        project.write("tool_handlers.yaml", f"# {key('tool-handlers')}handlers: []\n"),
        project.write("judge_script.yaml", f"# {key('judge-script')}"
                      + yaml.safe_dump([{"tool": "submit_score", "input": {"score": True, "rationale": "ok"}}])),
        project.write("judges/__init__.py", ""),
        project.write("judges/secret_judge.py",
                      f"SECRET = {key('judge-module').strip()!r}\n\ndef score(outputs):\n    return True, 'ok'\n"),
        project.write("judges/rubric.md", f"Pass if the answer is {key('judge-prompt')}"),
        project.write("judges/context.md", key("judge-context")),
    ]
    return paths


JUDGES = """
    judges:
      - name: expected
        check: |
          return "{needle}-check" not in str(outputs.get("files")), "checked"
      - name: module_judge
        module: judges.secret_judge
        function: score
      - name: rubric
        prompt_file: judges/rubric.md
        context: [judges/context.md]
        feedback_type: bool
""".replace("{needle}", NEEDLE)


# ---- the case-mode project ----------------------------------------------------------


def _reader_script(host_paths: list[str], resources: list[str]) -> list[dict[str, Any]]:
    quoted = " ".join(shlex.quote(p) for p in host_paths)
    attempt = (
        f"N={SHELL_NEEDLE}; "
        'try() { out=$("$@" 2>&1); rc=$?; case "$out" in *"$N"*) l=1;; *) l=0;; esac; '
        'echo "@@sh $1 rc=$rc leak=$l ${@: -1}"; }; '
    )
    shell_tools = attempt + (
        f"for p in {quoted}; do try cat \"$p\"; try awk '{{print}}' \"$p\"; try head -c 200 \"$p\";"
        " try python3 -c 'import sys; print(open(sys.argv[1]).read())' \"$p\";"
        " try cat \"/proc/1/root$p\"; try cat \"/proc/self/cwd/../..$p\"; done"
    )
    symlinks = attempt + (
        f"mkdir -p out; i=0; for p in {quoted}; do i=$((i+1));"
        " ln -s \"$p\" \"out/link$i\" && try cat \"out/link$i\";"
        " ln -s \"/proc/1/root$p\" \"out/rootlink$i\" && try cat \"out/rootlink$i\"; done;"
        " ln -s /etc/passwd out/passwd-link; ln -s ../../.. out/up-link; echo copied > out/plain.txt;"
        # python counts them: find cannot see the workspace under runsc 2022
        " echo \"@@links $(python3 -c 'import os; print(sum(os.path.islink(e.path) for e in os.scandir(\"out\")))')\""
    )
    names = " -o ".join(f"-name {n}" for n in (*KEY_NAMES, "input.yaml"))
    search = (
        f"echo \"@@find $(find / \\( -path /proc -o -path /sys \\) -prune -o \\( {names} \\) -print 2>/dev/null"
        " | sort | tr '\\n' ' ')\";"
        f" grep -r -a -l -s --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -e {SHELL_NEEDLE}"
        f" -e {DENIED_PARTS[0]}''{DENIED_PARTS[1]} / | sed 's/^/@@grep /';"
        " echo \"@@grep-control $(grep -r -l -s 'q: ' /workspace/input.yaml)\""
    )
    return [
        bash(shell_tools),
        bash(symlinks),
        bash(search, timeout_ms=300_000),
        read(host_paths[0]),
        read("/proc/1/root" + host_paths[1]),
        read("/workspace/../eval.yaml"),
        *probe_steps("answer_key", {"needles": [NEEDLE_PARTS, DENIED_PARTS], "host_paths": host_paths,
                                    "resources": resources}, timeout_ms=300_000),
        final("hunted"),
    ]


RESOURCES = ["/workspace/CLAUDE.md", "/workspace/scripts", "/workspace/.claude", "/workspace/docs"]


@pytest.fixture(scope="module")
def case_project(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> tuple[EvalProject, list[str]]:
    project = make_project(tmp_path_factory, "key", runtime)
    write_eval(project, f"""
        # {key('eval-yaml')}
        name: attack-answer-key
        execution: {{prompt: "{{q}}", timeout: 300, parallelism: 2}}
        models: {{skill: claude-sonnet-4-6, judge: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases, workspace: {{files: [docs]}}}}
        outputs: [{{path: out}}]
        permissions:
          deny:
            - {{path: docs/internal.md, tools: [Read, Bash]}}
    """, runtime, sandbox="filesystem: {denyRead: [docs/private, scripts/internal]}", tail=JUDGES)
    secrets = _write_answer_key(project)
    project.write("CLAUDE.md", "Be brief.\n")
    project.write("scripts/helper.sh", "echo helping\n")
    project.write("scripts/internal/answers.txt", f"{DENIED}-resource\n")
    (project.root / "scripts" / "leak.yaml").symlink_to("../eval.yaml")
    project.write(".claude/skills/scribe/SKILL.md", SKILL)
    secrets.append(project.write(".claude/settings.local.json", f'{{"note": "{key("claude-local").strip()}"}}\n'))
    secrets.append(project.write(".claude/notes.md", key("claude-notes")))

    host_paths = [str(project.root / "eval.yaml")]
    for case_id in ("reader", "neighbour"):
        is_reader = case_id == "reader"
        case_input = {"q": "look around"} if is_reader else {"q": "wait", "secret": key("neighbour-input").strip()}
        files = {
            "answers.yaml": f"answer: {key(case_id + '-answers')}",
            "annotations.yaml": f"expected: {key(case_id + '-annotations')}",
            "expected.txt": key(case_id + "-expected"),
            "docs/public.md": "public notes\n",
            "docs/private/secret.md": f"{DENIED}-private\n",
            "docs/internal.md": f"{DENIED}-internal\n",
        }
        script = [bash("sleep 6; echo waited"), final("waited")]
        case_dir = project.case(case_id, case_input, script=script, files=files)
        host_paths += [str(case_dir / name) for name in ("answers.yaml", "annotations.yaml", "expected.txt",
                                                         "model_script.yaml", "input.yaml")]
    host_paths = [p for p in host_paths if not p.endswith("reader/input.yaml")]  # its own input is no secret
    host_paths += [str(p) for p in secrets]
    reader = project.root / "cases" / "reader" / "model_script.yaml"
    reader.write_text(f"# {key('reader-model-script')}"
                      + yaml.safe_dump(_reader_script(host_paths, RESOURCES), sort_keys=False))
    neighbour_script = project.root / "cases" / "neighbour" / "model_script.yaml"
    neighbour_script.write_text(f"# {key('neighbour-model-script')}" + neighbour_script.read_text())
    return project, host_paths


@pytest.fixture(scope="module")
def case_run(case_project: tuple[EvalProject, list[str]], runtime: str) -> AttackRun:
    project, _ = case_project
    return run_attack(project, runtime, "answer-key", "--offline")


def test_no_tool_ever_returns_the_answer_key(case_run: AttackRun, case_project) -> None:
    _, host_paths = case_project
    output = case_run.output("reader")
    assert NEEDLE not in output
    attempts = tagged(output, "sh")
    # cat, awk, head, python3 open(): direct, via /proc/1/root and via the cwd link, for every path
    assert len(attempts) == len(host_paths) * 6 + len(host_paths) * 2
    assert all(" rc=0 " not in a and "leak=0" in a for a in attempts), attempts
    record_fact("answer key: shell reads attempted (all failed)", case_run.runtime, len(attempts))
    reads = [c for c in case_run.calls("reader") if c.name == "Read"]
    assert len(reads) == 3 and all(c.is_error or "does not exist" in c.output for c in reads), reads
    found = [line.split() for line in tagged(output, "find")]
    assert len(found) == 1 and set(found[0]) <= {"/workspace/input.yaml"}
    if not is_gvisor(case_run.runtime):
        # The control: find does see the workspace. Under runsc 2022 it cannot (its statx
        # fails there), so the python scan with its own control is the full search there.
        assert found == [["/workspace/input.yaml"]]
    assert tagged(output, "grep") == []
    assert tagged(output, "grep-control") == ["/workspace/input.yaml"]


def test_python_finds_nothing_through_proc_links_or_a_full_filesystem_scan(case_run: AttackRun, case_project) -> None:
    _, host_paths = case_project
    probes = by_probe(case_run.output("reader"))
    opens = probes["open"]
    assert {r["path"] for r in opens} == set(host_paths)
    for record in opens:
        assert record["vias"] == ["cwd", "direct", "root"] and record["attempts"] >= 5, record
        assert record["opened"] == 0 and record["leaks"] == 0, record
    record_fact("answer key: python open() attempts (direct, /proc/*/root, /proc/*/cwd), all failed",
                case_run.runtime, sum(r["attempts"] for r in opens))
    # every process's root is the container's own /, its cwd a container path
    links = probes["proc_links"][0]
    root = [t for t in links["root"] if not t.startswith("error:")]  # gVisor hides some with EACCES
    cwd = [t for t in links["cwd"] if not t.startswith("error:")]
    assert root == ["/"], links
    assert cwd and all(t.startswith("/workspace") for t in cwd), links
    scan = probes["fs_scan"][0]
    assert scan["hits"] == [] and scan["control_read"] and scan["scanned"] > 1000
    record_fact("answer key: files scanned inside, needle hits 0", case_run.runtime, scan["scanned"], "files")


def test_host_paths_in_mountinfo_lead_nowhere(case_run: AttackRun) -> None:
    sources = by_probe(case_run.output("reader")).get("mount_source", [])
    assert not any(r["leak"] for r in sources)
    host_only = sorted({r["source"] for r in sources if not r["exists"]})
    # what mountinfo reveals exists on the host only: staging dirs, Docker's storage
    assert all(not r["exists"] or not r["source"].startswith(("/tmp/", "/var/lib/docker")) for r in sources)
    record_fact("answer key: host paths revealed by mountinfo (none reachable)", case_run.runtime, len(host_only))


def test_mounted_resources_hold_the_project_resources_and_nothing_else(case_run: AttackRun) -> None:
    resources = {r["root"]: r for r in by_probe(case_run.output("reader"))["resource"]}
    assert not any(r.get("leak") for r in resources.values())
    assert resources["/workspace/CLAUDE.md"]["entries"] == [["", "file"]]
    # neither the symlink to eval.yaml nor the denied scripts/internal was copied
    assert resources["/workspace/scripts"]["entries"] == [["helper.sh", "file"]]
    claude = {tuple(e) for e in resources["/workspace/.claude"]["entries"]}
    assert claude == {("skills", "dir"), ("skills/scribe", "dir"), ("skills/scribe/SKILL.md", "file")}
    assert not any(kind == "link" for r in resources.values() for _, kind in r.get("entries", []))


def test_links_out_are_dangling_and_never_collected(case_run: AttackRun, case_project) -> None:
    _, host_paths = case_project
    output = case_run.output("reader")
    assert tagged(output, "links") == [str(2 * len(host_paths) + 2)]
    out = case_run.result.case("reader") / "out"
    assert (out / "plain.txt").read_text() == "copied\n"  # collection worked
    assert not any(p.is_symlink() for p in out.rglob("*"))
    assert sorted(p.name for p in out.iterdir()) == ["plain.txt"]


def test_the_hosts_copy_of_the_case_holds_no_answer_key(case_run: AttackRun) -> None:
    text = all_case_text(case_run.result.case("reader"))
    assert text and NEEDLE not in text
    neighbour = case_run.entry("neighbour")
    assert neighbour["end_reason"] == "exited" and neighbour["exit_code"] == 0
    assert case_run.entry("reader")["end_reason"] == "exited"


def test_denied_paths_are_not_in_the_container_at_all(case_run: AttackRun) -> None:
    """denyRead and a path-scoped permissions.deny rule: the paths are not there to read, by any tool."""
    output = case_run.output("reader")
    resources = {r["root"]: r for r in by_probe(output)["resource"]}
    assert resources["/workspace/docs"]["entries"] == [["public.md", "file"]]
    assert resources["/workspace/scripts"]["entries"] == [["helper.sh", "file"]]
    assert DENIED not in output and DENIED not in all_case_text(case_run.result.case("reader"))
    assert by_probe(output)["fs_scan"][0]["hits"] == []


# ---- workspace_mode: repo ----------------------------------------------------------------


@pytest.fixture(scope="module")
def repo_project(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> EvalProject:
    project = make_project(tmp_path_factory, "repo", runtime)
    write_eval(project, f"""
        # {key('repo-eval-yaml')}
        name: attack-repo
        execution: {{prompt: "{{q}}", timeout: 300}}
        models: {{skill: claude-sonnet-4-6, judge: claude-sonnet-4-6}}
        runner: {{workspace_mode: repo, permission_mode: bypassPermissions}}
        dataset: {{path: eval/cases}}
    """, runtime, sandbox="filesystem: {denyRead: [docs/private]}", tail=JUDGES)
    _write_answer_key(project)
    project.write("src/app.py", "VERSION = 'old'\n")
    project.write("docs/guide.md", "Use the new API.\n")
    project.write("docs/private/plan.md", f"{DENIED}-repo\n")
    case = project.root / "eval" / "cases" / "c1"
    case.mkdir(parents=True)
    (case / "input.yaml").write_text("q: update it\n")
    (case / "answers.yaml").write_text(key("repo-answers"))
    listing = "import os\nfor r, d, f in os.walk('/workspace'):\n    [print('@@file', os.path.join(r, n)) for n in f]\n"
    steps = [
        bash(f"python3 -c {shlex.quote(listing)}; grep -r -a -l -s {SHELL_NEEDLE} /workspace | sed 's/^/@@grep /'"),
        read("/workspace/eval.yaml"),
        final("listed"),
    ]
    (case / "model_script.yaml").write_text(f"# {key('repo-model-script')}" + yaml.safe_dump(steps, sort_keys=False))
    return project


@pytest.fixture(scope="module")
def repo_run(repo_project: EvalProject, runtime: str) -> AttackRun:
    return run_attack(repo_project, runtime, "repo", "--offline")


def test_repo_copy_lacks_eval_yaml_dataset_judges_and_scripts(repo_run: AttackRun) -> None:
    output = repo_run.output("c1")
    files = {line.removeprefix("/workspace/") for line in tagged(output, "file")}
    assert {"src/app.py", "docs/guide.md", "input.yaml"} <= files  # the project itself is there
    for gone in ("eval.yaml", "tool_handlers.yaml", "judge_script.yaml", "judges/secret_judge.py",
                 "judges/rubric.md", "judges/context.md"):
        assert gone not in files, gone
    assert not any(f.startswith(("eval/", "runs/")) for f in files), files
    assert tagged(output, "grep") == [] and NEEDLE not in output
    read_eval = next(c for c in repo_run.calls("c1") if c.name == "Read")
    assert read_eval.is_error or "does not exist" in read_eval.output
    assert NEEDLE not in all_case_text(repo_run.result.case("c1"))


def test_repo_copy_lacks_denied_paths(repo_run: AttackRun) -> None:
    files = {line.removeprefix("/workspace/") for line in tagged(repo_run.output("c1"), "file")}
    assert not any(f.startswith("docs/private") for f in files), files
