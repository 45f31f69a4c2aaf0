"""Started servers that crash, hang or never answer give a clear CodeIntelError, never a hang;
a crash is restarted once; one server per workspace root; and no process outlives agent-lsp:
after close, a cancel, SIGTERM, SIGKILL or the front ends' os._exit (checked in /proc)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agent_lsp.agent.ports import CodeIntelError
from tests.langservers.conftest import FAKE, alive, at, descendants, servers, start_time

pytestmark = pytest.mark.timeout(120)


def fake(mode: str, **more: object) -> dict:
    return {"auto": False, "servers": {"fake": {"command": [sys.executable, str(FAKE), mode], "extensions": [".py"], **more}}}


def starts(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().split()] if log.exists() else []


async def test_a_crashing_server_is_restarted_once_then_a_clear_error(project, tmp_path, monkeypatch):
    log = tmp_path / "starts.log"
    monkeypatch.setenv("FAKE_LSP_LOG", str(log))
    manager = servers(project, fake("crash"))
    app = project / "app.py"
    (source,) = manager.sources()
    try:
        with pytest.raises(CodeIntelError) as error:
            await source.request("textDocument/definition", at(app, 5, "make"), app)
        message = str(error.value)
        assert "language server `fake`" in message and "exit code 3" in message, message
        assert "restarted once" in message, message
        assert len(starts(log)) == 2
        with pytest.raises(CodeIntelError, match="restarted once"):  # not started a third time
            await source.request("textDocument/hover", at(app, 5, "make"), app)
        assert len(starts(log)) == 2
        assert manager.found()[0]["error"] == message
    finally:
        await manager.aclose()


async def test_a_missing_program_is_a_clear_error_at_once(project):
    manager = servers(project, {"auto": False, "servers": {"nope": {"command": ["no-such-language-server"], "extensions": [".py"]}}})
    app = project / "app.py"
    with pytest.raises(CodeIntelError, match="`no-such-language-server` was not found on PATH"):
        await manager.sources()[0].request("textDocument/hover", at(app, 5, "make"), app)


async def test_a_hanging_request_times_out_and_the_server_stays_usable(project):
    manager = servers(project, fake("hang"), request_timeout=1.5)
    app = project / "app.py"
    (source,) = manager.sources()
    try:
        started = time.monotonic()
        with pytest.raises(CodeIntelError, match=r"`fake` did not answer textDocument/definition within 1.5 s"):
            await source.request("textDocument/definition", at(app, 5, "make"), app)
        assert time.monotonic() - started < 10
        assert await source.request("textDocument/hover", at(app, 5, "make"), app) == {"contents": "[]"}
    finally:
        await manager.aclose()


async def test_a_server_that_never_answers_initialize_times_out_and_is_ended(project, tmp_path, monkeypatch):
    log = tmp_path / "starts.log"
    monkeypatch.setenv("FAKE_LSP_LOG", str(log))
    manager = servers(project, fake("mute"), start_timeout=1.5)
    app = project / "app.py"
    try:
        with pytest.raises(CodeIntelError, match="did not answer initialize within 1.5 s"):
            await manager.sources()[0].request("textDocument/hover", at(app, 5, "make"), app)
        (pid,) = starts(log)
        assert not alive(pid)
    finally:
        await manager.aclose()


async def test_configuration_is_answered_from_settings_and_one_server_runs_per_root(project, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.py").write_text("x = 1\n")
    manager = servers(project, fake("config", settings={"fake": {"answer": 42}}))
    manager.roots.append(other)
    (source,) = manager.sources()
    app = project / "app.py"
    try:
        await source.request("textDocument/hover", at(app, 5, "make"), app)
        for _ in range(50):  # the server asks workspace/configuration after `initialized`
            answer = await source.request("textDocument/hover", at(app, 5, "make"), app)
            if answer["contents"] != "[]":
                break
            await asyncio.sleep(0.1)
        assert answer == {"contents": '[[42, {"answer": 42}]]'}
        await source.request("textDocument/hover", at(other / "x.py", 1, "x"), other / "x.py")
        assert manager.found()[0]["running"] == 2
    finally:
        await manager.aclose()
    assert manager.found()[0]["running"] == 0


async def test_a_server_never_gets_the_models_api_key(project):
    manager = servers(project, fake("env"))
    app = project / "app.py"
    try:
        answer = await manager.sources()[0].request("textDocument/hover", at(app, 5, "make"), app)
        assert answer == {"contents": "[]"}  # OPENAI_API_KEY is set in the tests' environment
    finally:
        await manager.aclose()


async def test_close_and_cancel_leave_no_process(project, tmp_path, monkeypatch):
    log = tmp_path / "starts.log"
    monkeypatch.setenv("FAKE_LSP_LOG", str(log))
    manager = servers(project, fake("hang"), request_timeout=60)
    app = project / "app.py"
    (source,) = manager.sources()
    asking = asyncio.ensure_future(source.request("textDocument/definition", at(app, 5, "make"), app))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if starts(log):
            break
    await asyncio.sleep(0.5)
    asking.cancel()  # the run was cancelled mid-request
    with pytest.raises(asyncio.CancelledError):
        await asking
    (pid,) = starts(log)
    assert alive(pid)
    await manager.aclose()
    assert not alive(pid)
    with pytest.raises(CodeIntelError, match="shut down"):
        await source.request("textDocument/hover", at(app, 5, "make"), app)

    # cancelled while the server is starting (it never answers initialize): it is ended too
    log.unlink()
    manager = servers(project, fake("mute"))
    starting = asyncio.ensure_future(manager.sources()[0].request("textDocument/hover", at(app, 5, "make"), app))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if starts(log):
            break
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert manager.found()[0].get("error") is None  # a cancel is no crash
    (pid,) = starts(log)
    for _ in range(40):
        if not alive(pid):
            break
        await asyncio.sleep(0.1)
    assert not alive(pid)
    await manager.aclose()


OWNER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from agent_lsp.langservers.manager import LanguageServers
    from agent_lsp.settings_schema import LanguageServersSettings

    async def main():
        settings = {"auto": False, "servers": {"fake": {"command": [sys.executable, FAKE, "hang"], "extensions": [".py"]}}}
        manager = LanguageServers(LanguageServersSettings.model_validate(settings), [Path(ROOT)])
        app = Path(ROOT) / "app.py"
        params = {"textDocument": {"uri": app.as_uri()}, "position": {"line": 0, "character": 0}}
        await manager.sources()[0].request("textDocument/hover", params, app)
        print("ready", flush=True)
        if HOW == "leave":  # once the test has seen the processes
            await asyncio.to_thread(sys.stdin.readline)
            from agent_lsp import frontend
            frontend.leave(0)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("how", ["sigterm", "sigkill", "leave"])
def test_no_server_outlives_agent_lsp(project, how):
    code = f"FAKE, ROOT, HOW = {str(FAKE)!r}, {str(project)!r}, {how!r}\n" + OWNER
    owner = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        started = {pid: start_time(pid) for pid in descendants(owner.pid)}
        assert len(started) >= 2, started  # the reaper and the server under it
        if how == "leave":  # the processes are listed: now it may leave
            assert owner.stdin is not None
            owner.stdin.write("go\n")
            owner.stdin.flush()
        else:
            os.kill(owner.pid, signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        owner.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(p, t) for p, t in started.items()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [p for p, t in started.items() if alive(p, t)] == []
    finally:
        owner.kill()
        owner.wait()
