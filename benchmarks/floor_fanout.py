"""The floor for many runs in one process: bare openai-SDK loops (baselines.floor_run) sharing
one client and one event loop, in a process of their own as our server is.

Driven over stdin/stdout, a JSON line per round: `{"keys": [...]}` in; every key's run is
started at once and `{"done": {key: monotonic time of its final answer}, "cpu": seconds}`
comes back once all have finished. An empty line ends the process.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path


async def serve(base_url: str, root: Path) -> None:
    import openai

    from benchmarks.baselines import floor_run, tool_schemas

    tool_schemas()
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
    try:
        while line := await asyncio.to_thread(sys.stdin.readline):
            if not line.strip():
                break
            keys = json.loads(line)["keys"]
            done: dict[str, float] = {}
            c0 = time.process_time()

            async def one(key: str, done: dict[str, float] = done) -> None:
                await floor_run(base_url, f"[{key}] Read the parts one by one.", root, client)
                done[key] = time.monotonic()

            await asyncio.gather(*(one(key) for key in keys))
            print(json.dumps({"done": done, "cpu": time.process_time() - c0}), flush=True)
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], Path(sys.argv[2])))
