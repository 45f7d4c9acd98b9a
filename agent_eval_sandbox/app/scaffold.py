"""`agent-eval-sandbox init [DIR]`: a small working eval to start from.

It runs offline at once (`run --offline`): each case's model_script.yaml plays
the model, so the first run needs no key and shows the whole loop — a skill,
two cases, a check judge, thresholds. Nothing existing is overwritten: if any
file it would write is there already, it writes none.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from agent_eval_sandbox.errors import UserError

EVAL_YAML = """\
# yaml-language-server: $schema=eval.schema.json
# A starter eval written by `agent-eval-sandbox init`. Run it with no key:
#   agent-eval-sandbox run --offline
# Offline, each case's model_script.yaml plays the model; drop --offline to run the real one.
name: {name}
description: The note-taker skill writes a note with the given title and line.

execution:
  mode: case
  skill: note-taker
  arguments: '{{title}} {{line}}'
  timeout: 120
  max_budget_usd: 0.50

models:
  skill: claude-sonnet-4-6

runner:
  # The container is the boundary: the agent may use its tools without prompts.
  permission_mode: bypassPermissions

dataset:
  path: cases
  schema: |
    input.yaml: 'title' and 'line' of the note; annotations.yaml: 'expected', text the note must hold.

outputs:
  - path: notes
    schema: "note.md: a heading with the title, then the line."

judges:
  - name: note_written
    description: notes/note.md holds the expected text.
    check: |
      expected = outputs.get("annotations", {{}}).get("expected", "")
      note = outputs.get("files", {{}}).get("notes/note.md", "")
      if isinstance(note, str) and expected and expected in note:
          return True, f"found {{expected!r}}"
      return False, f"{{expected!r}} not in notes/note.md"
  - name: exited_cleanly
    description: The agent exited 0 within its deadline.
    check: |
      return outputs.get("exit_code") == 0, f"exit code {{outputs.get('exit_code')}}"

thresholds:
  note_written: {{ min_pass_rate: 1.0 }}
  exited_cleanly: {{ min_pass_rate: 1.0 }}
"""

SKILL_MD = """\
---
name: note-taker
description: Writes notes/note.md with a title and one line.
allowed-tools: Write, Bash
---

# Note taker

Arguments: `<title> <line>`.

Write `notes/note.md` holding `# <title>` and, below it, `<line>`. Write nothing else.
"""

CASES = {
    "001-shopping": ("Shopping", "Buy oat milk"),
    "002-reading": ("Reading", "Finish chapter three"),
}


def _case_files(case_id: str, title: str, line: str) -> dict[str, str]:
    # One case writes with Bash, the other with Write: both tool paths are in the starter.
    if case_id.endswith("shopping"):
        step: dict[str, object] = {"tool": "Bash", "input": {
            "command": f"mkdir -p notes && printf '# {title}\\n\\n{line}\\n' > notes/note.md"}}
    else:
        step = {"tool": "Write",
                "input": {"file_path": "/workspace/notes/note.md", "content": f"# {title}\n\n{line}\n"}}
    script = [step, {"text": "Wrote notes/note.md."}]
    return {
        "input.yaml": yaml.safe_dump({"title": title, "line": line}, sort_keys=False),
        "annotations.yaml": yaml.safe_dump({"expected": line}),
        "model_script.yaml": ("# What the scripted model answers offline, turn by turn (never copied into the "
                              "sandbox).\n" + yaml.safe_dump(script, sort_keys=False)),
    }


def scaffold_files(name: str) -> dict[str, str]:
    """Every file `init` writes, by path relative to the eval's directory (pure)."""
    files = {
        "eval.yaml": EVAL_YAML.format(name=name),
        ".claude/skills/note-taker/SKILL.md": SKILL_MD,
    }
    for case_id, (title, line) in CASES.items():
        for file_name, text in _case_files(case_id, title, line).items():
            files[f"cases/{case_id}/{file_name}"] = text
    return files


def write_scaffold(directory: Path, *, schema_text: str) -> list[Path]:
    """Write the starter eval (and eval.schema.json beside it) into `directory`; refuse to overwrite."""
    name = _eval_name(directory)
    files = {**scaffold_files(name), "eval.schema.json": schema_text}
    existing = sorted(rel for rel in files if (directory / rel).exists() or (directory / rel).is_symlink())
    if existing:
        more = f" (and {len(existing) - 1} more of its files)" if len(existing) > 1 else ""
        raise UserError(f"{directory / existing[0]} exists already{more}; init writes nothing over a file",
                        fix="choose an empty directory: agent-eval-sandbox init DIR")
    written = []
    for rel, text in files.items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as handle:  # "x": never replace a file that appeared meanwhile
            handle.write(text)
        written.append(path)
    return written


def _eval_name(directory: Path) -> str:
    stem = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in directory.resolve().name).strip("-")
    return stem or "my-eval"
