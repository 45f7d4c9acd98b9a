"""What the agent leaves behind, against the controller and the reports (found by an outside red team).

- a directory chain deeper than PATH_MAX (in `out/` and in the workspace root);
- HTML/XML payloads in file names, file contents, the final answer and a tool
  result, with control characters and non-UTF-8 bytes, echoed by a judge's
  rationale: report.html must run nothing and reach nothing, junit.xml must parse.

Promises attacked: the agent cannot make the controller crash or hang; report.html
runs no script; the reports are well-formed.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.docker_objects import objects_of_run

from .conftest import (
    AttackRun,
    bash,
    final,
    make_project,
    new_run_id,
    run_attack,
    write,
    write_eval,
)

pytestmark = pytest.mark.docker

DEEP = r'''
import os
for root in ("/workspace/out", "/workspace"):
    os.chdir(root)
    for i in range(1500):
        os.mkdir("ab")
        os.chdir("ab")
    with open("bottom.txt", "w") as fh:
        fh.write("deep\n")
os.chdir("/workspace")
print("@@deep done")
'''

PAYLOAD = ('</textarea></pre></code></style></title><script>alert(1)</script>'
           '<svg onload=alert(2)><img src=x onerror=alert(3)>'
           '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:9/"><base href="http://127.0.0.1:9/">'
           '<a href="javascript:alert(4)">x</a><iframe src="http://127.0.0.1:9/"></iframe>'
           ']]><!-- --><![CDATA[x]]> \x1b[31m \x07 \x0b \x0c end')

XSS_SCRIPT = r'''
import os
p = __PAYLOAD__
os.makedirs("/workspace/out", exist_ok=True)
names = ['<img src=x onerror=alert(5)>.txt', '"><script>alert(6)<\\script>.md', "a'onmouseover='alert(7).txt"]
for n in names:
    with open(os.path.join("/workspace/out", n), "w") as fh:
        fh.write(p)
with open("/workspace/out/payload.txt", "w") as fh:
    fh.write(p)
with open(b"/workspace/out/bytes-\xff\xfe<script>.bin", "wb") as fh:
    fh.write(b"\xff\xfe\x00<script>alert(8)</script>\x00")
with open("/workspace/notes.txt", "w") as fh:   # an in-place edit: goes to workspace.diff
    fh.write(p + "\n")
print(p)
'''.replace("__PAYLOAD__", repr(PAYLOAD))

ECHO_JUDGE = 'return (True, str(outputs.get("files", {}).get("payload.txt", ""))[:600])'


def _project(tmp_path_factory: pytest.TempPathFactory, runtime: str, label: str):
    project = make_project(tmp_path_factory, label, runtime)
    write_eval(project, f"""
        name: {label}
        execution: {{prompt: "{{q}}", timeout: 180}}
        models: {{skill: claude-sonnet-4-6}}
        runner: {{permission_mode: bypassPermissions}}
        dataset: {{path: cases, workspace: {{files: [notes.txt]}}}}
        outputs: [{{path: out}}]
        judges:
          - name: echo
            check: |
              {ECHO_JUDGE}
        thresholds:
          echo: {{min_pass_rate: 0.0}}
    """, runtime)
    project.case("o3-neighbour", {"q": "n"}, files={"notes.txt": "hello\n"},
                 script=[bash("mkdir -p out && echo fine > out/payload.txt"), final("ok")])
    return project


@pytest.fixture(scope="module")
def deep_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = _project(tmp_path_factory, runtime, "rt2deep")
    project.case("o1-deep", {"q": "deep"}, files={"notes.txt": "hello\n"},
                 script=[write("/workspace/deep.py", DEEP), bash("python3 /workspace/deep.py"), final("deep")])
    # Not run_attack: it asserts exit 0/1 before the tests below can look at what was recorded.
    run_id = new_run_id("rt2deep", runtime)
    result = project.run("--run-id", run_id, "--offline", timeout=900)
    assert objects_of_run(run_id) == []
    return AttackRun(result, run_id, runtime)


@pytest.fixture(scope="module")
def outputs_run(tmp_path_factory: pytest.TempPathFactory, runtime: str) -> AttackRun:
    project = _project(tmp_path_factory, runtime, "rt2xss")
    project.case("o2-xss", {"q": "xss"}, files={"notes.txt": "hello\n"},
                 script=[write("/workspace/x.py", XSS_SCRIPT), bash("python3 /workspace/x.py"), final(PAYLOAD)])
    return run_attack(project, runtime, "rt2xss", "--offline", timeout=900)


def test_deep_directories_neither_crash_nor_hang_the_controller(deep_run: AttackRun) -> None:
    proc = deep_run.result.process
    assert proc.returncode in (0, 1) and "internal error" not in proc.stderr, proc.stderr[-500:]
    run_dir = deep_run.result.run_dir
    assert run_dir is not None
    assert (run_dir / "summary.json").is_file() and (run_dir / "report.html").is_file()
    deep = deep_run.entry("o1-deep")
    assert deep["end_reason"] == "exited", json.dumps({k: deep.get(k) for k in ("end_reason", "error")})
    assert deep_run.entry("o3-neighbour")["end_reason"] == "exited"
    # what is deeper than the cap is left out and said so; what is above it is collected
    case_dir = run_dir / "cases" / "o1-deep"
    chain = "/".join(["ab"] * 63)
    assert f"NOTE: not collected: out/{chain}/" in (case_dir / "stderr.log").read_text()


def test_deep_case_whose_agent_ran_is_recorded_as_having_run(deep_run: AttackRun) -> None:
    runs = list(_find_run_dir(deep_run).glob("run_result.json"))
    data = json.loads(runs[0].read_text())["per_case"]["o1-deep"]
    # The agent ran (the model was called, money spent, the CLI exited 0): "did not run" is false.
    assert data.get("ran") is True or data.get("agent_duration_s") is not None, data


def _find_run_dir(run: AttackRun):
    runs_dir = Path(run.result.process.args[run.result.process.args.index("--runs-dir") + 1])
    return next(runs_dir.glob(f"*/{run.run_id}"))


class _Scan(HTMLParser):
    BAD = {"script", "iframe", "base", "object", "embed", "form", "svg", "img", "link", "frame", "frameset"}

    def __init__(self) -> None:
        super().__init__()
        self.problems: list[str] = []
        self.first_head_child: str | None = None
        self.in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "head":
            self.in_head = True
        elif self.in_head and self.first_head_child is None:
            self.first_head_child = f"{tag} {attrs}"
        if tag in self.BAD:
            self.problems.append(f"<{tag} {attrs}>")
        if tag == "meta" and any(k == "http-equiv" and (v or "").lower() == "refresh" for k, v in attrs):
            self.problems.append(f"meta refresh {attrs}")
        for key, value in attrs:
            if key.startswith("on"):
                self.problems.append(f"handler {key}={value!r} on <{tag}>")
            if key in ("href", "src", "action") and value and not value.startswith("#") and not value.startswith("data:"):
                self.problems.append(f"{key}={value!r} on <{tag}>")

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self.in_head = False


def test_report_html_runs_and_reaches_nothing(outputs_run: AttackRun) -> None:
    html = (outputs_run.result.run_dir / "report.html").read_text(encoding="utf-8", errors="replace")
    scan = _Scan()
    scan.feed(html)
    assert scan.problems == [], scan.problems[:20]
    assert "Content-Security-Policy" in html


def test_junit_xml_parses(outputs_run: AttackRun) -> None:
    run_dir = outputs_run.result.run_dir
    assert run_dir is not None
    ET.parse(run_dir / "junit.xml")
