"""agent-lsp's real server with one test command more, `agentLspTest.codeIntel {method, params,
path}`, that asks the editor source (server/code_intel.py) the way the code-intel tools do and
returns {result} or {error} (or {source: null} when the client did not advertise codeIntel).

With AGENT_LSP_PROBE_PLAN (a JSON file: [{name, method, params, path, retry?}]) and
AGENT_LSP_PROBE_OUT, the first didOpen starts the plan by itself (an editor driven through its
UI cannot send the command), `{ws}` and `{wsUri}` in it standing for the workspace; each step's {result} or {error} is written to the out file as
{name: answer}; `retry` repeats a null answer (or one without the text `until`) for that many seconds (a
language server still loading its project answers null, or from the open files only)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from agent_lsp.agent.ports import CodeIntelError  # noqa: E402
from agent_lsp.server.code_intel import editor_source  # noqa: E402
from agent_lsp.server.server import AgentServer, create_server  # noqa: E402


def main() -> None:
    from agent_lsp.agent.exec.keyguard import seal_process

    seal_process()  # an entry point, as `agent-lsp serve` is: the process-wide effects on (Decision 71)
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
        started = time.perf_counter()
        try:
            result = await source.request(asked["method"], asked["params"], path)
        except CodeIntelError as exc:
            return {"error": str(exc)}
        return {"result": result, "encoding": source.position_encoding(path),
                "handles": source.handles(path), "ms": (time.perf_counter() - started) * 1000}

    plan_file, out_file = os.environ.get("AGENT_LSP_PROBE_PLAN"), os.environ.get("AGENT_LSP_PROBE_OUT")
    if plan_file and out_file:
        from lsprotocol import types

        started: list[bool] = []

        @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
        async def did_open(ls: AgentServer, params: types.DidOpenTextDocumentParams) -> None:
            if started:
                return
            started.append(True)
            root = Path(ls.workspace.root_path or ".").resolve()
            text = Path(plan_file).read_text()
            # `{ws}`/`{wsUri}`: the workspace the editor opened (known only now)
            text = text.replace("{wsUri}", root.as_uri()).replace("{ws}", str(root))
            plan = json.loads(text)
            answers: dict[str, Any] = {}
            for step in plan:
                if "itemFrom" in step:  # a call hierarchy item an earlier step got
                    earlier = answers.get(step["itemFrom"], {}).get("result") or [None]
                    step = {**step, "params": {**step.get("params", {}), "item": earlier[0]}}
                logging.warning("probe: asking %s", step["name"])
                answers[step["name"]] = await ask(ls, step)
                logging.warning("probe: %s -> %s", step["name"], json.dumps(answers[step["name"]])[:300])
            Path(out_file + ".part").write_text(json.dumps(answers))
            os.replace(out_file + ".part", out_file)

    server.start_io()


async def ask(ls: AgentServer, step: dict[str, Any]) -> dict[str, Any]:
    source = editor_source(ls, ls.caps)
    if source is None:
        return {"source": None}
    deadline = time.monotonic() + float(step.get("retry", 0))
    started = time.monotonic()
    while True:
        try:
            result = await source.request(step["method"], step["params"], Path(step["path"]))
        except CodeIntelError as exc:
            return {"error": str(exc), "ms": (time.monotonic() - started) * 1000}
        done = bool(result) and step.get("until", "") in json.dumps(result)
        if done or time.monotonic() >= deadline:
            return {"result": result, "ms": (time.monotonic() - started) * 1000}
        await asyncio.sleep(0.5)


if __name__ == "__main__":
    main()
