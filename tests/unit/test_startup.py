"""`agent-lsp run`'s start-up (issue 33 part 3, Decision 72): the collector is off until the first
model request and back on after it, with what start-up built frozen; a workspace that declares no
MCP server does not load the MCP client machinery. Each check runs in a fresh interpreter, so
the collector's state and the imports are the process's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _python(code: str, cwd: Path | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          check=True, cwd=cwd)
    return done.stdout.strip()


def test_the_collector_is_paused_until_resume_then_back_on_with_start_up_frozen():
    code = (
        "import gc\n"
        "from agent_lsp.terminal import startup\n"
        "startup.pause()\n"
        "paused = not gc.isenabled()\n"
        "startup.resume()\n"
        "print(paused, gc.isenabled(), gc.get_freeze_count() > 0)\n"
    )
    assert _python(code) == "True True True"


def test_resume_without_pause_leaves_the_callers_collector_alone():
    """A run started in-process (tests, another front end) keeps its caller's collector."""
    code = (
        "import gc\n"
        "from agent_lsp.terminal import startup\n"
        "gc.disable()\n"
        "startup.resume()\n"
        "off = gc.isenabled()\n"
        "gc.enable()\n"
        "startup.resume()\n"
        "print(off, gc.isenabled(), gc.get_freeze_count())\n"
    )
    assert _python(code) == "False True 0"


def test_a_workspace_without_mcp_servers_has_an_empty_toolset_and_no_mcp_client(tmp_path):
    code = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from agent_lsp.mcp.hub import McpHub\n"
        "from agent_lsp.settings_schema import Settings\n"
        "async def main():\n"
        "    hub = McpHub()\n"
        "    tools = await hub.toolset([Path('.').resolve()], Settings())\n"
        "    print(await tools.tools(), tools.status(), await hub.status([Path('.').resolve()], Settings()))\n"
        "    await hub.aclose()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m in ('agent_lsp.mcp.manager', 'agent_lsp.mcp.connection', 'mcp')))\n"
    )
    assert _python(code, cwd=tmp_path).splitlines() == ["[] [] []", "[]"]
