"""Which tools a run offers: the main set, plan mode's, a sub-agent's (CONTRACT "Tools")."""

from __future__ import annotations

from agent_lsp.agent.fs.prompt_files import PromptFile
from agent_lsp.agent.tools.base import Tool
from agent_lsp.agent.tools.codeintel.offered import code_intel_edit_tools, code_intel_read_tools
from agent_lsp.agent.tools.command import RunCommand
from agent_lsp.agent.tools.debug import debug_tools
from agent_lsp.agent.tools.delegate import Delegate, DelegateToAgent
from agent_lsp.agent.tools.diagnostics import Diagnostics
from agent_lsp.agent.tools.edits import EditFile, WriteFile
from agent_lsp.agent.tools.files import ReadFile
from agent_lsp.agent.tools.list_files import ListFiles
from agent_lsp.agent.tools.processes import process_tools
from agent_lsp.agent.tools.remember import Remember
from agent_lsp.agent.tools.search import Search
from agent_lsp.agent.tools.skill import LoadSkill
from agent_lsp.settings import DebugSettings


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


def delegate_tool(agents: dict[str, PromptFile] | None = None) -> Delegate:
    """delegate, with `agent` and the agents listed when the user has agent definitions."""
    return DelegateToAgent(agents) if agents else Delegate()


def main_tools(
    extra: list[Tool] | None = None,
    diagnostics: bool = False,
    code_intel: bool = False,
    *,
    skills: bool = False,
    agents: dict[str, PromptFile] | None = None,
    debug: DebugSettings | None = None,
) -> list[Tool]:
    """`skills`: the skill tool, when the user has skills; `agents`: the user's agents; `debug`:
    the debugger's tools, when a debug source exists (never in plan mode or sub-agents)."""
    return [
        *read_tools(diagnostics, code_intel),
        EditFile(),
        WriteFile(),
        *(code_intel_edit_tools() if code_intel else []),
        RunCommand(),
        *process_tools(),
        delegate_tool(agents),
        Remember(),
        *([LoadSkill()] if skills else []),
        *(debug_tools(debug) if debug is not None else []),
        *(extra or []),
    ]


def plan_tools(
    extra: list[Tool] | None = None,
    diagnostics: bool = False,
    code_intel: bool = False,
    *,
    skills: bool = False,
    agents: dict[str, PromptFile] | None = None,
) -> list[Tool]:
    """Plan mode (CONTRACT Decision 21): the read-only tools, delegate, the skill tool, and
    extra tools that run like read-only ones; not `remember`."""
    return [
        *read_tools(diagnostics, code_intel),
        delegate_tool(agents),
        *([LoadSkill()] if skills else []),
        *(t for t in extra or [] if t.read_only),
    ]


def subagent_tools(diagnostics: bool = False, code_intel: bool = False) -> list[Tool]:
    return read_tools(diagnostics, code_intel)
