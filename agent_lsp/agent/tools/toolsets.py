"""Which tools a run offers: the main set, plan mode's, a sub-agent's (CONTRACT "Tools")."""

from __future__ import annotations

from agent_lsp.agent.tools.base import Tool
from agent_lsp.agent.tools.command import RunCommand
from agent_lsp.agent.tools.delegate import Delegate
from agent_lsp.agent.tools.diagnostics import Diagnostics
from agent_lsp.agent.tools.edits import EditFile, WriteFile
from agent_lsp.agent.tools.files import ReadFile
from agent_lsp.agent.tools.list_files import ListFiles
from agent_lsp.agent.tools.remember import Remember
from agent_lsp.agent.tools.search import Search
from agent_lsp.agent.tools.skill import LoadSkill


def read_tools(diagnostics: bool = False) -> list[Tool]:
    """`diagnostics` only when the editor can answer agentLsp/diagnostics."""
    return [ReadFile(), ListFiles(), Search(), *([Diagnostics()] if diagnostics else [])]


def main_tools(
    extra: list[Tool] | None = None, diagnostics: bool = False, *, skills: bool = False
) -> list[Tool]:
    """`skills`: the skill tool, when the user has skills."""
    return [
        *read_tools(diagnostics),
        EditFile(),
        WriteFile(),
        RunCommand(),
        Delegate(),
        Remember(),
        *([LoadSkill()] if skills else []),
        *(extra or []),
    ]


def plan_tools(
    extra: list[Tool] | None = None, diagnostics: bool = False, *, skills: bool = False
) -> list[Tool]:
    """Plan mode (CONTRACT Decision 21): the read-only tools, delegate, the skill tool, and
    extra tools that run like read-only ones; not `remember`."""
    return [
        *read_tools(diagnostics),
        Delegate(),
        *([LoadSkill()] if skills else []),
        *(t for t in extra or [] if t.read_only),
    ]


def subagent_tools(diagnostics: bool = False) -> list[Tool]:
    return read_tools(diagnostics)
