"""agent-lsp's real server with one test command more, `agentLspTest.codeIntel {method, params,
path}`, that asks the editor source (server/code_intel.py) the way the code-intel tools do and
returns {result} or {error} (or {source: null} when the client did not advertise codeIntel)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent_lsp.agent.ports import CodeIntelError  # noqa: E402
from agent_lsp.server.code_intel import editor_source  # noqa: E402
from agent_lsp.server.server import AgentServer, create_server  # noqa: E402


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = create_server()

    @server.command("agentLspTest.codeIntel")
    async def probe(ls: AgentServer, *args: Any) -> dict[str, Any]:
        asked = args[0]
        asked = asked._asdict() if hasattr(asked, "_asdict") else asked
        from agent_lsp.server.rpc import plain

        asked = plain(asked)
        source = editor_source(ls, ls.caps)
        if source is None:
            return {"source": None}
        path = Path(asked["path"])
        try:
            result = await source.request(asked["method"], asked["params"], path)
        except CodeIntelError as exc:
            return {"error": str(exc)}
        return {"result": result, "encoding": source.position_encoding(path),
                "handles": source.handles(path)}

    server.start_io()


if __name__ == "__main__":
    main()
