"""Tool names across formats: Claude Code's names for our tools (CONTRACT "Your existing
setup"), as agent definitions and command files write them."""

from __future__ import annotations

# Claude Code's tool names (CONTRACT "Tool names across formats") -> ours.
CLAUDE_TOOLS = {
    "Bash": "run_command",
    "BashOutput": "process_output",
    "KillShell": "stop_process",
    "Read": "read_file",
    "Edit": "edit_file",
    "MultiEdit": "edit_file",
    "Write": "write_file",
    "Grep": "search",
    "Glob": "list_files",
    "LS": "list_files",
    "Task": "delegate",
    "Skill": "skill",
}


def tool_name(name: str) -> str:
    """Our name for a tool named in Claude Code's words (`Read`, `mcp__github__get_issue`)."""
    if name in CLAUDE_TOOLS:
        return CLAUDE_TOOLS[name]
    if name.startswith("mcp__"):
        return name[len("mcp__") :]
    return name
