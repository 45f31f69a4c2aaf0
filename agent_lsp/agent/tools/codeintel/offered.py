"""Which code-intel tools a toolset gets (Decision 39: the plan and sub-agent toolsets get the
read-only ones)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_lsp.agent.tools.base import Tool

CODE_INTEL_PROMPT = (
    "\nCode intelligence: the language servers answer find_definition, find_references, hover, "
    "symbols, call_hierarchy and rename_symbol. Use these for code symbols (where something is "
    "defined, every caller or use, a type, a rename): they are exact where a text search also "
    "finds same-named other symbols, strings and comments. Use search for text."
)
SUBAGENT_CODE_INTEL_PROMPT = (
    "\nFor code symbols (definitions, callers, uses, types) use find_definition, "
    "find_references, hover, symbols and call_hierarchy (the language servers: exact); use "
    "search for text."
)


def code_intel_read_tools() -> list[Tool]:
    """find_definition, find_references, hover, symbols, call_hierarchy. Their modules are
    imported here: a run with no language server never needs them (start-up: issue 33)."""
    from agent_lsp.agent.tools.codeintel.navigate import (
        CallHierarchy,
        FindDefinition,
        FindReferences,
        Hover,
    )
    from agent_lsp.agent.tools.codeintel.outline import Symbols

    return [FindDefinition(), FindReferences(), Hover(), Symbols(), CallHierarchy()]


def code_intel_edit_tools() -> list[Tool]:
    """rename_symbol."""
    from agent_lsp.agent.tools.codeintel.rename import RenameSymbol

    return [RenameSymbol()]
