"""Issue 20 item 10 (Decision 45): resuming a session trusts nothing in the state dir. A
transcript's `spillPath` makes only a regular file inside the spill folder readable again; a
transcript or session index that is a FIFO, a link or a device is refused at once with a clear
message (never waited on), by `agent-lsp run --session` and by the host every front end uses."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

from agent_lsp.agent.host import AgentHost
from agent_lsp.agent.state.sessions import SessionError
from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, last_tool_results, run, tools_reply

pytestmark = pytest.mark.timeout(90)


def first_run(model, workspace: Path, tmp_path: Path) -> dict:
    """A session with one run whose command output was spilled (toolOutputLimit 300)."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"toolOutputLimit": 300}))
    model.add([tools_reply(call("run_command", id="big", command=f"{sys.executable} -c \"print('y' * 5000)\"")),
               {"text": "done"}])
    proc = run_cli(agent_run(model, workspace, "first", "--settings", str(settings)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return report_of(proc.stdout)


def records(transcript: Path) -> list[dict]:
    return [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]


def test_a_spill_path_outside_the_spill_folder_stays_unreadable_after_resume(model, workspace, tmp_path, state_dir):
    report = first_run(model, workspace, tmp_path)
    transcript = Path(report["transcript"])
    (legit,) = [r["spillPath"] for r in records(transcript) if r.get("type") == "toolResult" and r.get("spillPath")]
    assert Path(legit).resolve().is_relative_to((state_dir / "spill").resolve())
    secret = tmp_path / "outside-secret.txt"
    secret.write_text("OUTSIDE-SECRET\n")
    link = Path(legit).parent / "link-out.txt"  # inside the spill folder, pointing out of it
    link.symlink_to(secret)
    # Someone with write access to the state dir adds results naming other files as spills.
    forged = [r for r in records(transcript) if r.get("type") == "toolResult"][0]
    with transcript.open("a") as handle:
        for target in ("/etc/passwd", str(secret), str(link)):
            handle.write(json.dumps({**forged, "spillPath": target}) + "\n")
    model.add([tools_reply(call("read_file", id="passwd", path="/etc/passwd"),
                           call("read_file", id="secret", path=str(secret)),
                           call("read_file", id="link", path=str(link)),
                           call("read_file", id="legit", path=legit)),
               {"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "again", "--session", report["sessionId"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = last_tool_results(model.requests[-1])
    for refused in ("passwd", "secret", "link"):
        assert "outside the workspace" in results[refused], results[refused]
    assert "root:" not in results["passwd"] and "OUTSIDE-SECRET" not in results["secret"] + results["link"]
    assert "yyyy" in results["legit"]  # a real spill file of the session stays readable


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _symlink(path: Path) -> None:
    copy = path.with_name("copy-" + path.name)
    path.rename(copy)
    path.symlink_to(copy)


TAMPERED = {
    "transcript-fifo": lambda report, index: _fifo(Path(report["transcript"])),
    "transcript-symlink": lambda report, index: _symlink(Path(report["transcript"])),
    "transcript-device": lambda report, index: index.write_text(
        index.read_text().replace(json.dumps(report["transcript"]), json.dumps("/dev/zero"))),
    "index-fifo": lambda report, index: _fifo(index),
    "index-device-symlink": lambda report, index: (index.unlink(), index.symlink_to("/dev/zero")),
}
WHY = {"transcript-fifo": "FIFO", "transcript-symlink": "symbolic link", "transcript-device": "character device",
       "index-fifo": "FIFO", "index-device-symlink": "symbolic link"}


def tamper(model, workspace, tmp_path, state_dir, name) -> dict:
    model.add([{"text": "done"}])
    proc = run_cli(agent_run(model, workspace, "first"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    (index,) = state_dir.glob(f"workspaces/*/sessions/{report['sessionId']}.json")
    TAMPERED[name](report, index)
    return report


@pytest.mark.parametrize("name", list(TAMPERED))
def test_run_session_on_a_tampered_state_file_fails_fast_and_says_why(model, workspace, tmp_path, state_dir, name):
    report = tamper(model, workspace, tmp_path, state_dir, name)
    started = time.monotonic()
    proc = run_cli(agent_run(model, workspace, "again", "--session", report["sessionId"]), timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert time.monotonic() - started < 20  # a hang would wait for a writer forever
    assert "agent-lsp run:" in proc.stderr and WHY[name] in proc.stderr and "not a regular file" in proc.stderr, proc.stderr
    assert len(model.requests) == 1  # the model was never called for the resumed run


@pytest.mark.parametrize("name", list(TAMPERED))
async def test_the_hosts_session_load_refuses_a_tampered_state_file_without_waiting(model, workspace, tmp_path, state_dir, name):
    """What the LSP server's and ACP's session loads call (AgentHost.open_session)."""
    report = await asyncio.to_thread(tamper, model, workspace, tmp_path, state_dir, name)
    host = AgentHost()
    try:
        with pytest.raises(SessionError) as refused:
            await asyncio.wait_for(host.open_session([workspace], report["sessionId"]), 10)
    finally:
        await host.aclose()
    assert WHY[name] in str(refused.value) and "not a regular file" in str(refused.value)


def test_sessions_listing_skips_an_index_that_is_a_fifo(model, workspace, tmp_path, state_dir):
    tamper(model, workspace, tmp_path, state_dir, "index-fifo")
    model.add([{"text": "done"}])
    second = report_of(run_cli(agent_run(model, workspace, "second")).stdout)
    listing = run_cli([sys.executable, "-m", "agent_lsp", "sessions", "--workspace", str(workspace), "--json"], timeout=30)
    assert listing.returncode == 0, listing.stderr
    assert [item["sessionId"] for item in json.loads(listing.stdout)] == [second["sessionId"]]


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
async def test_a_spill_file_is_written_as_a_regular_file_only(model, workspace, tmp_path, state_dir, kind):
    """A FIFO planted where a spill goes would block the event loop on open (no reader comes);
    a link would send the write elsewhere. Either way the run goes on and the result says the
    whole output could not be saved."""
    spill = state_dir / "spill" / "r-planted" / "big.txt"
    spill.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    if kind == "fifo":
        os.mkfifo(spill)
    else:
        spill.symlink_to(victim)
    model.add([tools_reply(call("run_command", id="big", command=f"{sys.executable} -c \"print('y' * 5000)\"")),
               {"text": "done"}])
    report, _, _ = await run("go", model, workspace, run_id="r-planted", toolOutputLimit=300)
    assert str(report.stop_reason) == "done", report.error
    result = last_tool_results(model.requests[-1])["big"]
    assert "could not be saved" in result and "yyyy" in result
    assert victim.read_text() == "keep me\n"
