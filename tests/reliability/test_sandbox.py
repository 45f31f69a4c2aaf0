"""run_command confined by bubblewrap (issue 17): writes outside the workspace fail and leave
nothing, read-only refuses them inside too, no network unless allowed, secrets hidden, every child
gone with the command, cancel kills the sandbox, the trust boundary, and no bwrap = refused."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agent_lsp.agent.exec import sandbox
from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.loop.run import Session, run_task
from agent_lsp.agent.messages import StopReason
from agent_lsp.agent.ports import Decision
from tests.unit.kit import (
    Events,
    ScriptedApprover,
    alive,
    call,
    last_tool_results,
    make_settings,
    run,
    tools_reply,
)

pytestmark = [pytest.mark.timeout(60),
              pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"), reason="bubblewrap is not installed")]


@pytest.fixture(autouse=True)
def fresh_probe():
    sandbox.reset_probe()
    yield
    sandbox.reset_probe()


def box(mode: str = "workspace-write", **more) -> dict:
    return {"sandbox": {"mode": mode, **more}, "approval": {"default": "allow"}}


async def one_command(model, workspace, command: str, **values) -> str:
    model.add([tools_reply(call("run_command", id="c", command=command)), {"text": "ok"}])
    report, _, _ = await run("run it", model, workspace, **values)
    assert report.stop_reason == StopReason.DONE, report.error
    return last_tool_results(model.requests[-1])["c"]


@pytest.mark.parametrize("where", ["/var/tmp", "home"])
async def test_a_write_outside_the_workspace_fails_and_leaves_nothing(model, workspace, where):
    folder = Path("/var/tmp") if where == "/var/tmp" else Path.home()
    outside = folder / f"agent-lsp-sandbox-escape-{os.getpid()}.txt"
    try:
        result = await one_command(model, workspace, f"sh -c 'echo x > {outside}'", **box())
        assert not outside.exists()
        assert result.startswith("error:") and "blocked by the sandbox" in result
    finally:
        outside.unlink(missing_ok=True)


async def test_inside_the_workspace_writes_work_and_read_only_refuses_them(model, workspace):
    result = await one_command(model, workspace, "sh -c 'echo hi > made.txt; cat made.txt'", **box())
    assert result.startswith("exit code 0") and (workspace / "made.txt").read_text() == "hi\n"
    result = await one_command(model, workspace, "sh -c 'echo hi > other.txt'", **box("read-only"))
    assert not (workspace / "other.txt").exists()
    assert "blocked by the sandbox" in result and "read-only" in result


async def test_tmp_is_private_and_writable(model, workspace):
    marker = Path("/tmp") / f"agent-lsp-sandbox-probe-{os.getpid()}"
    result = await one_command(model, workspace, f"sh -c 'echo t > {marker} && cat {marker} && echo $TMPDIR'", **box("read-only"))
    assert result.startswith("exit code 0") and "/tmp" in result
    assert not marker.exists(), "the sandbox's /tmp is its own"


@contextmanager
def hello_server(server: socket.socket) -> Iterator[socket.socket]:
    """Answer every connection to a bound socket with HELLO-FROM-HOST until the block ends."""
    server.listen(5)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.sendall(b"HELLO-FROM-HOST\n")
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(2)
        server.close()


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    with hello_server(server):
        yield server.getsockname()[1]


def connect_command(port: int) -> str:
    # bash's /dev/tcp: no interpreter from a path the sandbox hides (the venv may live under /tmp)
    return f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && head -1 <&3'"


async def test_no_network_unless_allowed(model, workspace, listener):
    result = await one_command(model, workspace, connect_command(listener), **box())
    assert "HELLO-FROM-HOST" not in result and "blocked by the sandbox" in result and "network" in result
    result = await one_command(model, workspace, connect_command(listener), **box(network=True))
    assert "HELLO-FROM-HOST" in result


async def test_secrets_under_home_are_not_readable(model, workspace, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh/id_ed25519").write_text("PRIVATE-KEY-BYTES\n")
    (home / ".netrc").write_text("machine x password NETRC-SECRET\n")
    monkeypatch.setenv("HOME", str(home))
    result = await one_command(model, workspace, f"sh -c 'cat {home}/.ssh/id_ed25519 {home}/.netrc; ls -a {home}/.ssh'", **box())
    assert "PRIVATE-KEY-BYTES" not in result and "NETRC-SECRET" not in result


async def test_the_state_dir_is_hidden(model, workspace, state_dir):
    (state_dir / "runs").mkdir(parents=True, exist_ok=True)
    (state_dir / "runs" / "old.jsonl").write_text("TRANSCRIPT-SECRET\n")
    result = await one_command(model, workspace, f"sh -c 'cat {state_dir}/runs/old.jsonl'", **box())
    assert "TRANSCRIPT-SECRET" not in result


async def test_a_background_child_is_gone_after_the_command(model, workspace, tmp_path):
    pidfile = workspace / "bg.pid"
    # Durations no other test uses (tests run side by side): these sleeps are this test's own.
    await one_command(model, workspace, f"sh -c 'sleep 7300 & echo $! > {pidfile.name}; setsid sleep 7301 & true'", **box())
    # The pid inside the sandbox's namespace is not the host's: find the host's sleeps instead.
    leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmd(p) in ("sleep\x007300\x00", "sleep\x007301\x00")]
    assert [p for p in leftovers if alive(int(p.name))] == []


def _cmd(entry: Path) -> str:
    try:
        return (entry / "cmdline").read_text()
    except OSError:
        return ""


async def test_cancel_kills_the_whole_sandbox(model, workspace):
    model.add([tools_reply(call("run_command", command="sh -c 'sleep 7302 & sleep 7303'")), {"text": "never"}])
    task = asyncio.ensure_future(run_task("go", session=Session(), settings=make_settings(model, **box()),
                                          workspace=DiskWorkspace([workspace]), approver=ScriptedApprover(), emit=Events()))
    for _ in range(300):
        if any(_cmd(p) == "sleep\x007303\x00" for p in Path("/proc").iterdir() if p.name.isdigit()):
            break
        await asyncio.sleep(0.02)
    task.cancel()
    report = await asyncio.wait_for(task, 10)
    assert report.stop_reason == StopReason.CANCELLED
    await asyncio.sleep(0.3)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmd(p) in ("sleep\x007302\x00", "sleep\x007303\x00") and alive(int(p.name))]


async def test_sandboxed_commands_may_run_without_asking(model, workspace):
    model.add([tools_reply(call("run_command", id="c", command="echo boxed")), {"text": "ok"}])
    approver = ScriptedApprover(default=Decision.DENY)
    await run("echo", model, workspace, approver=approver, sandbox={"mode": "workspace-write"},
              approval={"default": "ask", "sandboxed": "allow"})
    assert approver.requests == []
    assert last_tool_results(model.requests[-1])["c"] == "exit code 0\nboxed"
    model.add([tools_reply(call("run_command", id="d", command="echo denied")), {"text": "ok"}])
    await run("echo", model, workspace, approver=approver, sandbox={"mode": "workspace-write"},
              approval={"default": "deny", "sandboxed": "allow"})
    assert last_tool_results(model.requests[-1])["d"].startswith("denied:"), "a deny policy still denies"


async def test_the_approval_says_how_the_command_will_run(model, workspace):
    model.add([tools_reply(call("run_command", command="echo hi")), {"text": "ok"}])
    approver = ScriptedApprover(Decision.ALLOW)
    await run("echo", model, workspace, approver=approver, sandbox={"mode": "read-only"})
    assert "sandboxed: bubblewrap, read-only" in approver.requests[0].detail and "no network" in approver.requests[0].detail


async def test_without_bwrap_every_command_is_refused_and_nothing_runs(model, workspace, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = await one_command(model, workspace, f"{sys.executable} -c \"open('ran.txt','w')\"", **box())
    assert not (workspace / "ran.txt").exists()
    assert "refused" in result and "bubblewrap" in result and "apt install bubblewrap" in result


async def test_the_sandbox_settings_from_workspace_configuration_are_ignored(open_editor, model, workspace, tmp_path):
    outside = tmp_path / "escaped.txt"
    model.add("escape", [{"tool_calls": [{"name": "run_command", "arguments": {"command": f"sh -c 'echo x > {outside}'"}}]}, {"text": "ok"}])
    editor = await open_editor(init={"sandbox": {"mode": "workspace-write"}, "approval": {"default": "allow"}},
                               configuration={"sandbox": {"mode": "off"}, "approval": {"sandboxed": "allow"}})
    started = await editor.run("escape the sandbox")
    await editor.wait_stop(started["runId"])
    assert not outside.exists(), "the repository could not turn the sandbox off"
