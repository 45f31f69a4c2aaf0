"""Which tools a run offers: the main set, plan mode's, a sub-agent's (CONTRACT "Tools")."""

from __future__ import annotations

from agent_lsp.agent.tools.base import Tool
from agent_lsp.agent.tools.codeintel.offered import code_intel_edit_tools, code_intel_read_tools
from agent_lsp.agent.tools.command import RunCommand
from agent_lsp.agent.tools.delegate import Delegate
from agent_lsp.agent.tools.diagnostics import Diagnostics
from agent_lsp.agent.tools.edits import EditFile, WriteFile
from agent_lsp.agent.tools.files import ReadFile
from agent_lsp.agent.tools.list_files import ListFiles
from agent_lsp.agent.tools.remember import Remember
from agent_lsp.agent.tools.search import Search


def read_tools(diagnostics: bool = False, code_intel: bool = False) -> list[Tool]:
    """`diagnostics` only when the editor can answer agentLsp/diagnostics; `code_intel` when a
    language-server source exists (Decision 39)."""
    return [
        ReadFile(),
        ListFiles(),
        Search(),
        *([Diagnostics()] if diagnostics else []),
        *(code_intel_read_tools() if code_intel else []),
    ]


def main_tools(
    extra: list[Tool] | None = None, diagnostics: bool = False, code_intel: bool = False
) -> list[Tool]:
    return [
        *read_tools(diagnostics, code_intel),
        EditFile(),
        WriteFile(),
        *(code_intel_edit_tools() if code_intel else []),
        RunCommand(),
        Delegate(),
        Remember(),
        *(extra or []),
    ]


def plan_tools(
    extra: list[Tool] | None = None, diagnostics: bool = False, code_intel: bool = False
) -> list[Tool]:
    """Plan mode (CONTRACT Decision 21): the read-only tools, delegate, and extra tools that run
    like read-only ones; not `remember`."""
    return [
        *read_tools(diagnostics, code_intel),
        Delegate(),
        *(t for t in extra or [] if t.read_only),
    ]


def subagent_tools(diagnostics: bool = False, code_intel: bool = False) -> list[Tool]:
    return read_tools(diagnostics, code_intel)
