"""Issue 21.13: a server that runs all day holds bounded state. Old sessions are pruned with their
transcripts and spill folders (Decision 19), orphan spills go too, the snapshots' private git
objects are dropped past a size bound (checkpoints keep their own copies), idle sessions leave
memory (reloaded from their transcripts, their "Allow for session" grants kept: Decision 46),
finished runs are bounded, and a replaced set of MCP servers is closed."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import secrets
import subprocess
import sys
import time
import weakref
from pathlib import Path

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from agent_lsp.agent.ports import Decision
from agent_lsp.agent.state.checkpoints import CheckpointStore, RunCheckpoint
from agent_lsp.agent.state.sessions import SessionStore, sweep_orphans
from agent_lsp.mcp.hub import McpHub
from tests.e2e.harness import start_editor
from tests.unit.kit import Events, ScriptedApprover, alive, call, make_settings, tools_reply

pytestmark = pytest.mark.timeout(90)

OLD = time.time() - 40 * 86400


def fake_session(state: Path, workspace: Path, session_id: str, run_id: str, when: float, transcript: Path | None = None) -> dict[str, Path]:
    """A session index as an earlier process left it, with its run's transcript and spill."""
    store = SessionStore(state, workspace)
    store.dir.mkdir(parents=True, exist_ok=True)
    transcript = transcript or state / "runs" / f"{run_id}.jsonl"
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.write_text('{"type": "start"}\n')
    spill = state / "spill" / run_id
    spill.mkdir(parents=True, exist_ok=True)
    (spill / "call_1.txt").write_text("a long result")
    index = store.dir / f"{session_id}.json"
    index.write_text(json.dumps({"sessionId": session_id, "workspace": str(workspace.resolve()), "title": "old", "created": when,
                                 "updated": when, "runs": [{"runId": run_id, "transcript": str(transcript), "started": when, "stop": "done"}]}))
    for path in (index, transcript, spill):
        os.utime(path, (when, when))
    return {"index": index, "transcript": transcript, "spill": spill}


async def test_a_run_over_lsp_prunes_old_sessions_with_their_transcripts_and_spills(model, workspace, state_dir, tmp_path):
    old = fake_session(state_dir, workspace, "s-old", "r-old", OLD)
    recent = fake_session(state_dir, workspace, "s-recent", "r-recent", time.time() - 86400)
    elsewhere = tmp_path / "my-transcripts" / "r-mine.jsonl"  # a transcriptDir the user chose: theirs
    mine = fake_session(state_dir, workspace, "s-mine", "r-mine", OLD, transcript=elsewhere)
    orphan = state_dir / "spill" / "r-orphan"  # a spill no session names (its session was never saved)
    orphan.mkdir(parents=True)
    os.utime(orphan, (OLD, OLD))
    young_orphan = state_dir / "spill" / "r-young"
    young_orphan.mkdir(parents=True)

    model.add([{"text": "hello"}])
    editor = await start_editor(workspace, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    try:
        started = await editor.run("hi")
        await editor.wait_stop(started["runId"])
        await editor.wait_for(lambda: not old["index"].exists(), 10, "the old session to be pruned")
        sessions = {s["sessionId"] for s in await editor.execute("agentLsp.sessions", {})}
    finally:
        await editor.quit()
    assert sessions == {started["sessionId"], "s-recent"}
    assert not old["transcript"].exists() and not old["spill"].exists()
    assert not mine["index"].exists() and elsewhere.exists(), "a transcript outside the state dir is never removed"
    assert all(p.exists() for p in recent.values())
    assert not orphan.exists() and young_orphan.exists()


def test_sessions_past_one_hundred_are_pruned_oldest_first_and_protected_ones_kept(workspace, state_dir):
    now = time.time()
    made = [fake_session(state_dir, workspace, f"s-{i:03}", f"r-{i:03}", now - 1000 + i) for i in range(103)]
    dropped = SessionStore(state_dir, workspace).prune(protect={"s-000"})
    assert sorted(dropped) == ["s-001", "s-002"]  # s-000 is older but in use by this process
    assert made[0]["index"].exists() and not made[1]["spill"].exists() and made[3]["spill"].exists()


async def test_runs_ending_together_prune_a_workspace_once_and_a_later_run_prunes_again(workspace, state_dir, monkeypatch):
    from agent_lsp.agent import host as host_sessions

    host, store = AgentHost(), SessionStore(state_dir, workspace)
    first = fake_session(state_dir, workspace, "s-first", "r-first", OLD)
    await host.prune_state(store, set(), set())
    assert not first["index"].exists()
    second = fake_session(state_dir, workspace, "s-second", "r-second", OLD)
    await host.prune_state(store, set(), set())  # a run that ended in the same moment: no second listing
    assert second["index"].exists()
    monkeypatch.setattr(host_sessions, "PRUNE_SECONDS", 0)  # the next run ends later
    await host.prune_state(store, {"s-second"}, set())
    assert second["index"].exists(), "a session a running run holds is kept"
    await host.prune_state(store, set(), set())
    assert not second["index"].exists() and not second["spill"].exists()


def test_an_unreadable_index_stops_the_orphan_sweep(workspace, state_dir):
    orphan = state_dir / "spill" / "r-orphan"
    orphan.mkdir(parents=True)
    os.utime(orphan, (OLD, OLD))
    store = SessionStore(state_dir, workspace)
    store.dir.mkdir(parents=True)
    (store.dir / "s-bad.json").write_text("{not json")
    assert sweep_orphans(state_dir, set()) == 0 and orphan.exists()
    (store.dir / "s-bad.json").unlink()
    assert sweep_orphans(state_dir, set()) == 1 and not orphan.exists()


# -- the snapshots' private git objects -----------------------------------------------------------
def git_repo(root: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "-c", "user.email=a@b", "-c", "user.name=n", "commit", "-qm", "init"], cwd=root, check=True)


def objects_size(store: CheckpointStore) -> int:
    folders = list((store.snapshotter.state / "git").glob("*/objects"))
    assert len(folders) == 1
    return sum(f.stat().st_size for f in folders[0].rglob("*") if f.is_file() and f.parent.name != "info")


async def command(checkpoint: RunCheckpoint, change) -> list[Path]:
    before = await checkpoint.before_command()
    assert before is not None
    change()
    return await checkpoint.after_command(before)


async def test_private_git_objects_are_dropped_past_a_bound_and_nothing_restorable_is_lost(workspace, state_dir):
    git_repo(workspace)
    ws = DiskWorkspace([workspace])
    store = CheckpointStore(state_dir, [workspace])
    store.snapshotter.max_git_objects = 100_000
    store.snapshotter.size_check_seconds = 0
    big = workspace / "data.txt"  # untracked: its versions live only in the private objects
    versions = [secrets.token_hex(50_000) for _ in range(10)]  # ~55 kB each once git compressed it
    checkpoints = []
    for i, text in enumerate(versions[1:], 1):
        checkpoint = RunCheckpoint(store, ws, f"r-{i}", "s-1")
        if i == 1:
            big.write_text(versions[0])
        changed = await command(checkpoint, lambda text=text: big.write_text(text))
        assert changed == [big.resolve()]
        await checkpoint.close()
        checkpoints.append(checkpoint)
    assert objects_size(store) < 300_000, "the private objects stay near the bound (10 versions would be ~550 kB)"
    # Each run's checkpoint still holds the content from before it (its own blob copy).
    for i, checkpoint in enumerate(checkpoints):
        record = checkpoint.manifest.files[str(big.resolve())]
        assert store.blobs.get(record.before).decode() == versions[i]
    # And snapshots still tell what a command changed after a drop.
    last = RunCheckpoint(store, ws, "r-last", "s-1")
    assert await command(last, lambda: (workspace / "calc.py").write_text("changed\n")) == [(workspace / "calc.py").resolve()]


async def test_objects_a_pending_snapshot_needs_are_not_dropped(workspace, state_dir):
    git_repo(workspace)
    ws = DiskWorkspace([workspace])
    store = CheckpointStore(state_dir, [workspace])
    store.snapshotter.size_check_seconds = 0
    (workspace / "data.txt").write_text("x" * 200_000)
    pending = RunCheckpoint(store, ws, "r-pending", "s-1")
    before = await pending.before_command()  # a long command of one run, still going
    store.snapshotter.max_git_objects = 1  # now every check wants to drop
    other = RunCheckpoint(store, ws, "r-other", "s-2")
    assert await command(other, lambda: (workspace / "other.txt").write_text("o")) == [(workspace / "other.txt").resolve()]
    (workspace / "data.txt").write_text("y")
    changed = await pending.after_command(before)  # its tree is still readable
    assert (workspace / "data.txt").resolve() in changed
    record = pending.manifest.files[str((workspace / "data.txt").resolve())]
    assert store.blobs.get(record.before) == b"x" * 200_000
    size = objects_size(store)
    await command(RunCheckpoint(store, ws, "r-next", "s-3"), lambda: None)  # no lease left: dropped now
    assert objects_size(store) < size


# -- memory: idle sessions, finished runs, replaced MCP servers ------------------------------------
def host_ports(roots: list[Path], approver: ScriptedApprover) -> RunPorts:
    return RunPorts(DiskWorkspace(roots), approver, Events())


async def run_on(host: AgentHost, roots, settings, prompt: str, session_id: str | None, approver: ScriptedApprover):
    session, store = await host.open_session(roots, session_id)
    hosted = host.start(RunRequest(prompt, session=session, store=store, settings=settings, ports=host_ports(roots, approver)))
    await asyncio.wait_for(hosted.task, 20)
    return hosted.report


async def test_idle_sessions_leave_memory_reload_from_transcripts_and_keep_session_grants(model, workspace):
    model.add("GOAL", [tools_reply(call("run_command", id="c1", command="echo hi")), {"text": "one"},
                       tools_reply(call("run_command", id="c2", command="echo hi")), {"text": "two"}])
    model.add("OTHER", [{"text": "other"}])
    settings = make_settings(model)
    roots = [workspace.resolve()]
    host = AgentHost(keep_sessions=1, keep_finished=0)
    try:
        asked = ScriptedApprover(Decision.ALLOW_SESSION)
        first = await run_on(host, roots, settings, "GOAL: say hi", None, asked)
        assert len(asked.requests) == 1
        ref = host.sessions[first.session_id][0]
        await run_on(host, roots, settings, "OTHER", None, ScriptedApprover())
        assert len(host.sessions) == 1
        assert first.session_id not in host.sessions, "the idle session left memory"
        gone = weakref.ref(ref)
        del ref
        gc.collect()
        assert gone() is None, "nothing else holds the evicted session"
        again = ScriptedApprover(Decision.DENY)
        second = await run_on(host, roots, settings, "and again", first.session_id, again)
        assert again.requests == [], "the session's grant outlived its eviction"
        assert second.session_id == first.session_id
        sent = model.requests[-1]["messages"]
        assert sent[1]["content"] == "GOAL: say hi" and any(m["role"] == "tool" and "hi" in m["content"] for m in sent)
        assert len(host.finished) == 0
    finally:
        await host.aclose()


async def test_an_evicted_session_still_held_is_found_again_not_loaded_twice(model, workspace):
    model.add([{"text": "one"}])
    settings = make_settings(model)
    roots = [workspace.resolve()]
    host = AgentHost(keep_sessions=0)
    try:
        report = await run_on(host, roots, settings, "hello", None, ScriptedApprover())
        held, _ = host.live(report.session_id)  # a front end (ACP) keeps its session object
        assert report.session_id not in host.sessions
        again, _ = await host.open_session(roots, report.session_id)
        assert again is held
    finally:
        await host.aclose()


async def test_finished_runs_are_bounded(model, workspace):
    model.add([{"text": "x", "repeat": 4}])
    settings = make_settings(model)
    roots = [workspace.resolve()]
    host = AgentHost(keep_finished=2)
    try:
        ids = [(await run_on(host, roots, settings, f"run {i}", None, ScriptedApprover())).run_id for i in range(4)]
        assert list(host.finished) == ids[-2:]
    finally:
        await host.aclose()


TINY_SERVER = '''
from mcp.server.mcpserver import MCPServer
server = MCPServer("tiny")

@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"

server.run()
'''


async def test_a_replaced_set_of_mcp_servers_is_closed(model, workspace, tmp_path):
    script = tmp_path / "tiny_server.py"
    script.write_text(TINY_SERVER)
    model.add([{"text": "x", "repeat": 3}])
    roots = [workspace.resolve()]
    host = AgentHost(tool_servers=McpHub())  # as the front ends compose it
    try:
        one = make_settings(model, mcpServers={"one": {"command": sys.executable, "args": [str(script)]}})
        session, store = await host.open_session(roots, None)
        first = host.start(RunRequest("first", session=session, store=store, settings=one, ports=host_ports(roots, ScriptedApprover())))
        await asyncio.wait_for(first.task, 30)
        pid = first.mcp.server_pid("one")
        assert pid is not None and alive(pid)
        two = make_settings(model, mcpServers={"two": {"command": sys.executable, "args": [str(script)]}})
        second = host.start(RunRequest("second", session=session, store=store, settings=two, ports=host_ports(roots, ScriptedApprover())))
        await asyncio.wait_for(second.task, 30)
        assert second.mcp is not first.mcp
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not alive(pid), "the replaced configuration's server was stopped"
        assert second.mcp.server_pid("two") is not None and alive(second.mcp.server_pid("two"))
    finally:
        await host.aclose()
