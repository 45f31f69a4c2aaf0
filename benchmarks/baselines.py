"""The baselines of issue 5, on the same scripted model and the same `read_file` tool.

* floor: a bare loop on the `openai` SDK (stream, append the assistant message and the tool
  results, call again) - the least any runtime can add.
* peer: openai-agents-python (`Runner.run_streamed`, function tools, tracing disabled).

Both offer the model the same seven tools as our runtime (same names and parameters; only
`read_file` is used by the scripts), so every runtime sends requests of the same shape and the
figures compare the runtimes' machinery, not the size of their tool lists.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from benchmarks.common import read_numbered

FLOOR_SYSTEM = "You are a coding agent. Use read_file to read files."


@cache
def tool_schemas() -> list[dict[str, Any]]:
    """Our seven tools' JSON schemas, computed once (outside any timing)."""
    from agent_lsp.agent.tools.base import ToolBox
    from agent_lsp.agent.tools.toolsets import main_tools

    return ToolBox(main_tools()).schemas()


async def floor_run(base_url: str, prompt: str, root: Path, client: Any = None) -> int:
    """Run the bare loop to its final answer; returns the number of model calls. Many loops in
    one process share one `client` (as our server's runs share theirs)."""
    import openai

    own = client is None
    client = client or openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": FLOOR_SYSTEM},
                                      {"role": "user", "content": prompt}]
    calls_made = 0
    try:
        while True:
            calls_made += 1
            stream = await client.chat.completions.create(
                model="m", messages=messages, tools=tool_schemas(), stream=True,
                stream_options={"include_usage": True})
            text: list[str] = []
            calls: dict[int, dict[str, str]] = {}
            async for chunk in stream:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta.content:
                    text.append(delta.content)
                for part in delta.tool_calls or ():
                    acc = calls.setdefault(part.index, {"id": "", "name": "", "arguments": ""})
                    if part.id:
                        acc["id"] = part.id
                    if part.function and part.function.name:
                        acc["name"] += part.function.name
                    if part.function and part.function.arguments:
                        acc["arguments"] += part.function.arguments
            message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
            if calls:
                message["tool_calls"] = [{"id": c["id"], "type": "function",
                                          "function": {"name": c["name"], "arguments": c["arguments"]}}
                                         for _, c in sorted(calls.items())]
            messages.append(message)
            if not calls:
                return calls_made
            for _, call in sorted(calls.items()):
                path = json.loads(call["arguments"])["path"]
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": read_numbered(root, path)})
    finally:
        if own:
            await client.close()


def peer_available() -> str | None:
    """None when openai-agents imports; else why not (recorded in the results)."""
    try:
        import agents  # noqa: F401
    except Exception as exc:  # not installed, or broken with this openai version
        return f"openai-agents unavailable: {type(exc).__name__}: {exc}"
    return None


async def peer_run(base_url: str, prompt: str, root: Path, max_turns: int) -> int:
    """openai-agents on the same script; returns the number of model calls (turns)."""
    import openai
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        set_tracing_disabled,
    )

    set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    try:
        agent = Agent(name="bench", instructions=FLOOR_SYSTEM, tools=peer_tools(root),
                      model=OpenAIChatCompletionsModel(model="m", openai_client=client))
        result = Runner.run_streamed(agent, input=prompt, max_turns=max_turns)
        async for _event in result.stream_events():
            pass
        if result.final_output is None:
            raise RuntimeError("openai-agents run ended without a final output")
        return result.current_turn
    finally:
        await client.close()


def peer_tools(root: Path) -> list[Any]:
    """The seven tools as openai-agents function tools; only read_file does anything."""
    from agents import function_tool

    async def read_file(path: str, offset: int | None = None, limit: int | None = None) -> str:
        """Read a text file, with line numbers."""
        return read_numbered(root, path)

    async def list_files(path: str = ".", glob: str | None = None) -> str:
        """List files recursively."""
        raise NotImplementedError

    async def search(pattern: str, path: str | None = None, glob: str | None = None) -> str:
        """Search files with a regex."""
        raise NotImplementedError

    async def edit_file(path: str, old_text: str, new_text: str) -> str:
        """Replace one exact occurrence of old_text with new_text."""
        raise NotImplementedError

    async def write_file(path: str, content: str) -> str:
        """Create or overwrite a file."""
        raise NotImplementedError

    async def run_command(command: str, cwd: str | None = None, timeout: float | None = None) -> str:
        """Run a command in the workspace."""
        raise NotImplementedError

    async def delegate(task: str) -> str:
        """Hand a read-only sub-task to a sub-agent."""
        raise NotImplementedError

    return [function_tool(f) for f in (read_file, list_files, search, edit_file, write_file, run_command, delegate)]
