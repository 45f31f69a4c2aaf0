"""Issue 21.11: VS Code asks for code actions on every cursor move, and each answer looks for the
last rewindable run among up to 100 checkpoint manifests: reading them must never block the
server's event loop (asyncio's debug mode reports any callback that holds it)."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from lsprotocol import types

from agent_lsp.agent.state.checkpoints import FileRecord, Manifest
from agent_lsp.agent.state.sessions import workspace_state
from tests.e2e.test_code_actions import code_actions

pytestmark = pytest.mark.timeout(120)
SLOW = re.compile(r"Executing .* took (\d+\.\d+) seconds")


def many_manifests(state, workspace, count: int = 100, records: int = 6000) -> None:
    folder = workspace_state(state, workspace.resolve()) / "checkpoints" / "runs"
    folder.mkdir(parents=True)
    for n in range(count):
        manifest = Manifest(f"r-{n:08d}", "s-1", time.time() - 1000 + n, finished=True)
        for i in range(records):
            path = str(workspace / f"src/module_{i}.py")
            manifest.files[path] = FileRecord(path, "0" * 64, "1" * 64, via="command")
        (folder / f"r-{n:08d}.json").write_bytes(manifest.to_json())


async def test_code_actions_over_100_big_manifests_never_hold_the_event_loop(open_editor, workspace, state_dir):
    many_manifests(state_dir, workspace)
    editor = await open_editor(env={"PYTHONASYNCIODEBUG": "1"})
    uri = (workspace / "calc.py").resolve().as_uri()
    rng = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=3))
    await asyncio.sleep(1)
    seen = len(editor.stderr)

    for _ in range(3):  # cold, then warm
        actions = await code_actions(editor, uri, rng)
    await asyncio.sleep(0.5)

    assert any(a.title.startswith("Agent: rewind last run (6000 files)") for a in actions)
    held = [float(m.group(1)) for line in editor.stderr[seen:] if (m := SLOW.search(line))]
    assert not [t for t in held if t > 0.5], f"the event loop was held for {max(held)} s"
