"""What the Claude Code CLI in the sandbox offers, as measured: its own slash commands and its tools.

Both lists are facts about one CLI version (`MEASURED_VERSION`, the default
`claude_version` of the image), read from a real run in the sandbox image: the
`system/init` event `claude -p --output-format stream-json --verbose` prints
first (its `slash_commands` and `tools`), and the tool results the CLI gave a
scripted model calling each name. Checks that use them are skipped, or only
warn, for another version.
"""

from __future__ import annotations

MEASURED_VERSION = "2.1.332"

# `slash_commands` of the init event (the quickstart's cases/*/stdout.log), minus the
# project's own skills; the bundled skills (`skills` of that event) are among them.
BUILTIN_COMMANDS = frozenset({
    "__remote-workflow", "agents", "auto-mode-setup", "autocompact", "batch", "claude-api", "clear",
    "code-review", "color", "compact", "config", "context", "dataviz", "debug", "deep-research", "doctor",
    "effort", "fast", "fewer-permission-prompts", "focus", "goal", "heapdump", "init", "insights",
    "list-agents", "loop", "mcp", "model", "output-style", "plugin-authoring", "recap", "reload-plugins",
    "reload-skills", "rename", "run", "run-skill-generator", "security-review", "simplify",
    "team-onboarding", "update-config", "usage", "verify", "workflow-authoring", "workflow-launch-exec",
})

# `tools` of the init event, with the names the CLI also accepts for them (Agent for
# Task, KillShell/KillBash for TaskStop), and AskUserQuestion, which the CLI enables
# or disables per session. Any other name gets "No such tool available" — measured
# for Glob, Grep, LS, MultiEdit, TodoWrite, BashOutput, NotebookRead, TaskOutput.
TOOLS = frozenset({
    "Agent", "AskUserQuestion", "Bash", "CronCreate", "CronDelete", "CronList", "Edit", "EnterWorktree",
    "ExitWorktree", "KillBash", "KillShell", "ListAgents", "Monitor", "NotebookEdit", "Read", "ReportFindings",
    "ScheduleWakeup", "SendMessage", "Skill", "Task", "TaskCreate", "TaskGet", "TaskList", "TaskStop",
    "TaskUpdate", "ToolSearch", "WebFetch", "WebSearch", "Workflow", "Write",
})
# MCP tools are named by their server (mcp__<server>__<tool>): not the CLI's to list.
MCP_PREFIX = "mcp__"


def is_cli_tool(name: str) -> bool:
    return name in TOOLS or name.startswith(MCP_PREFIX)
