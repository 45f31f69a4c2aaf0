"""The bare openai-SDK loop as a process of its own, for the first-request start-up figure
(`first_request.py`): import the SDK, send one streamed request with the same seven tool
schemas as ours, print the answer, exit. Standalone (nothing of agent_lsp or benchmarks is
imported), so it pays what any script on the SDK pays and nothing more.

    python benchmarks/bare_loop.py BASE_URL PROMPT TOOLS_JSON_FILE
"""

from __future__ import annotations

import asyncio
import json
import sys

SYSTEM = "You are a coding agent. Use read_file to read files."


async def main(base_url: str, prompt: str, tools: list[dict[str, object]]) -> int:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    try:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
            tools=tools, stream=True, stream_options={"include_usage": True})
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                sys.stdout.write(chunk.choices[0].delta.content)
        sys.stdout.write("\n")
    finally:
        await client.close()
    return 0


if __name__ == "__main__":
    with open(sys.argv[3], encoding="utf-8") as fh:
        schemas = json.load(fh)
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2], schemas)))
