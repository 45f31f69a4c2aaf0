"""Which code-intel tools a toolset gets (Decision 39: the plan and sub-agent toolsets get the
read-only ones)."""

from __future__ import annotations

from agent_lsp.agent.tools.base import Tool


def code_intel_read_tools() -> list[Tool]:
    """find_definition, find_references, hover, symbols, call_hierarchy."""
    return []


def code_intel_edit_tools() -> list[Tool]:
    """rename_symbol."""
    return []
