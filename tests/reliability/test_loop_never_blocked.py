"""Issue 21.11: VS Code asks for code actions on every cursor move, and each answer looks for the
last rewindable run among up to 100 checkpoint manifests: reading them must never block the
server's event loop (asyncio's debug mode reports any callback that holds it)."""

from __future__ import annotations

import asyncio
import json
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


def rewind_titles(actions: list[types.CodeAction]) -> list[tuple[str, list]]:
    return [(a.title, list(a.command.arguments or [])) for a in actions if a.title.startswith("Agent: rewind last run")]


async def test_fifty_code_actions_at_once_over_big_manifests_name_the_newest_run_as_it_changes(
        open_editor, model, workspace, state_dir):
    """Issue 32: 50 code actions at once, cold, over 100 manifests of 6,000 files each: each
    names the newest rewindable run (read from the manifests' heads, one listing for all), and
    the answer follows what changes next: a new run, its rewind, a manifest another process
    wrote in the older form (no `restorableFiles`), a rewound run."""
    many_manifests(state_dir, workspace)
    folder = workspace_state(state_dir, workspace.resolve()) / "checkpoints" / "runs"
    editor = await open_editor(init={"approval": {"default": "allow"}})
    uri = (workspace / "calc.py").resolve().as_uri()
    rng = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=3))

    answers = await asyncio.gather(*(code_actions(editor, uri, rng) for _ in range(50)))
    assert {tuple(map(str, rewind_titles(a))) for a in answers} == {
        (str(("Agent: rewind last run (6000 files)", [{"runId": "r-00000099"}])),)}

    model.add("edit it", [{"tool_calls": [{"name": "edit_file", "arguments": {
        "path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]}, {"text": "fixed"}])
    started = await editor.run("edit it")
    assert (await editor.wait_stop(started["runId"], 30))["stopReason"] == "done"
    assert rewind_titles(await code_actions(editor, uri, rng)) == [
        ("Agent: rewind last run (1 file)", [{"runId": started["runId"]}])]

    await editor.execute("agentLsp.rewind", {"runId": started["runId"]})
    assert rewind_titles(await code_actions(editor, uri, rng)) == [
        ("Agent: rewind last run (6000 files)", [{"runId": "r-00000099"}])]

    older = Manifest("r-other-process", "s-2", time.time(), finished=True)
    for i in range(3):
        path = str(workspace / f"src/other_{i}.py")
        older.files[path] = FileRecord(path, "0" * 64, "1" * 64)
    data = json.loads(older.to_json())
    del data["restorableFiles"]  # as manifests were written before issue 32
    (folder / "r-other-process.json").write_text(json.dumps(data))
    assert rewind_titles(await code_actions(editor, uri, rng)) == [
        ("Agent: rewind last run (3 files)", [{"runId": "r-other-process"}])]
