"""The tools offered to the model (CONTRACT: read_file, list_files, search, edit_file,
write_file, run_command, delegate)."""

from agent_lsp.agent.tools.base import ToolBox, ToolContext, ToolError
from agent_lsp.agent.tools.command import RunCommand
from agent_lsp.agent.tools.delegate import Delegate
from agent_lsp.agent.tools.edits import EditFile, WriteFile
from agent_lsp.agent.tools.files import ListFiles, ReadFile, Search


def main_tools() -> ToolBox:
    return ToolBox([ReadFile(), ListFiles(), Search(), EditFile(), WriteFile(), RunCommand(), Delegate()])


def subagent_tools() -> ToolBox:
    return ToolBox([ReadFile(), ListFiles(), Search()])


__all__ = ["ToolBox", "ToolContext", "ToolError", "main_tools", "subagent_tools"]
