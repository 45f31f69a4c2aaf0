"""The VS Code extension in a real VS Code: code-server driven from Debian's Chromium.

`tests/editors/vscode/setup.sh` installs Chromium, Node 24, code-server and playwright-core
(cached outside the repo); `tests/editors/vscode/run-test.mjs` builds and packs the .vsix,
installs it into a fresh code-server and plays the scenarios against the scripted model.
Set AGENT_LSP_SKIP_VSCODE=1 to skip; AGENT_LSP_UPDATE_SCREENSHOT=1 refreshes the README's
screenshot (editor-clients/vscode/screenshot.png).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lsp.testing.scripted_model import ScriptedModelServer

REPO = Path(__file__).resolve().parents[2]
HERE = REPO / "tests" / "editors" / "vscode"
EXTENSION = REPO / "editor-clients" / "vscode"

RUN_TASK = "Fix the add function in calc.py"
CANCEL_TASK = "Think very slowly about calc.py"
PALETTE_CANCEL_TASK = "Ponder mul in calc.py forever"
DISMISS_TASK = "Square in mul of calc.py"
DISMISS_FINAL = "Understood, I left mul alone."
MODEL_TEXT = "add subtracts instead of adding, so I will fix it."
FINAL_TEXT = "Fixed: add now returns a + b."
ASK_QUESTION = "Does this work for floats?"
ASK_ANSWER = "Yes, add works for floats too."

pytestmark = pytest.mark.skipif(
    os.environ.get("AGENT_LSP_SKIP_VSCODE") == "1", reason="AGENT_LSP_SKIP_VSCODE=1"
)


@pytest.fixture(scope="module")
def tools() -> dict[str, str]:
    """Runs the (idempotent, cached) setup and returns the environment it prints."""
    proc = subprocess.run(
        ["bash", str(HERE / "setup.sh")], capture_output=True, text=True, timeout=1500,
        env={**os.environ, "PYTHON": os.environ.get("AGENT_LSP_SETUP_PYTHON", "python3")},
    )
    if proc.returncode != 0:
        pytest.fail(f"setup.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    found: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export "):].partition("=")
            found[name] = shlex.split(value)[0] if value else ""
    return found


@pytest.fixture
def server_wrapper(tmp_path: Path) -> Path:
    """`agent-lsp` as this very interpreter runs it, whatever is on PATH."""
    wrapper = tmp_path / "agent-lsp"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m agent_lsp "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def kill_marked(marker: str) -> list[int]:
    """Ends the processes whose environment carries `marker` (code-server, its extension
    hosts, the agent-lsp servers), e.g. after the driver itself was killed by a timeout."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"AGENT_LSP_E2E_MARKER={marker}".encode() in (entry / "environ").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    return killed


def test_vscode_run_approve_edit_and_cancel(tmp_path: Path, tools, server_wrapper):
    shots = tmp_path / "screenshots"
    with ScriptedModelServer() as model:
        model.add(RUN_TASK, [
            {"text": MODEL_TEXT, "chunk_size": 6, "chunk_delay": 0.02,
             "tool_calls": [{"name": "edit_file", "arguments": {
                 "path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]},
            {"text": FINAL_TEXT},
        ])
        model.add(CANCEL_TASK, [{"text": "too late", "ttft": 60}])
        model.add(ASK_QUESTION, [{"text": ASK_ANSWER}])
        model.add(PALETTE_CANCEL_TASK, [{"text": "too late", "ttft": 60}])
        model.add(DISMISS_TASK, [
            {"text": "Squaring in mul.", "tool_calls": [{"name": "edit_file", "arguments": {
                "path": "calc.py", "old_text": "return a * b", "new_text": "return a ** b"}}]},
            {"text": DISMISS_FINAL},
        ])
        marker = f"agent-lsp-vscode-pytest-{os.getpid()}-{tmp_path.name}"
        env = {
            **os.environ,
            "AGENT_LSP_E2E_MARKER": marker,
            **tools,
            "AGENT_LSP_SERVER": str(server_wrapper),
            "AGENT_LSP_MODEL_URL": model.base_url,
            "AGENT_LSP_SCREENSHOT_DIR": str(shots),
            "RUN_TASK": RUN_TASK,
            "CANCEL_TASK": CANCEL_TASK,
            "EXPECT_EDIT_OLD": "return a - b",
            "EXPECT_EDIT_NEW": "return a + b",
            # the panel shows its last lines: the run's final text is the one in view
            "EXPECT_TEXT": FINAL_TEXT,
            "ASK_QUESTION": ASK_QUESTION,
            "ASK_ANSWER": ASK_ANSWER,
            "PALETTE_CANCEL_TASK": PALETTE_CANCEL_TASK,
            "DISMISS_TASK": DISMISS_TASK,
        }
        try:
            proc = subprocess.run(
                [tools["AGENT_LSP_NODE"], str(HERE / "run-test.mjs")],
                capture_output=True, text=True, timeout=900, env=env, cwd=REPO,
            )
        finally:
            leftovers = kill_marked(marker)
        run_requests = model.requests_for(RUN_TASK)
        cancel_requests = model.requests_for(CANCEL_TASK)
        ask_requests = model.requests_for(ASK_QUESTION)
        dismiss_requests = model.requests_for(DISMISS_TASK)

    (tmp_path / "result.json").write_text(proc.stdout)
    (tmp_path / "driver.log").write_text(proc.stderr)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"run-test.mjs printed no JSON (exit {proc.returncode}):\n"
                    f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-6000:]}")
    report = json.dumps({k: v for k, v in result.items() if k != "scenarios"}, indent=1)[-8000:]
    assert result["ok"], f"{result.get('error')}\n{report}\nstderr: {proc.stderr[-3000:]}"
    assert result["orphans"] == [], "processes outlived code-server"
    assert leftovers == [], "processes outlived the driver"
    assert proc.returncode == 0

    run = result["scenarios"]["run"]
    # The approval toast names the tool and offers the contract's three actions.
    assert "edit_file" in run["approvalText"]
    assert [b.strip() for b in run["approvalButtons"]][:3] == ["Allow", "Allow for session", "Deny"]
    # The edit is in the editor and, saved after the edit, on disk; no tab left dirty.
    assert "return a + b" in run["editorText"]
    assert "return a + b" in run["fileOnDisk"] and "return a - b" not in run["fileOnDisk"]
    assert run["dirtyTabs"] == 0
    # The stream: the model's text whole (deltas appended, not one per line), the tool call,
    # the report; and the same text visible in the Output panel.
    out = run["agentOutput"]
    assert MODEL_TEXT in out
    assert FINAL_TEXT in out
    assert "▶" in out and "edit_file" in out
    assert "stop reason: done" in out
    assert FINAL_TEXT in run["outputPanelText"]
    assert len(run_requests) == 2

    cancel = result["scenarios"]["cancel"]
    assert "Cancel" in cancel["progressText"]
    assert "cancelled" in cancel["agentOutput"]
    assert "stop reason: cancelled" in cancel["agentOutput"]
    # CONTRACT: a cancel ends the run within a second (checked with a generous deadline).
    assert cancel["cancelMs"] < 5000, cancel["cancelMs"]
    # ...through `window/workDoneProgress/cancel`, not the extension's agentLsp.cancel fallback.
    assert "still going" not in result["serverLog"]
    assert len(cancel_requests) == 1
    # A new session: the slow task did not continue the first conversation.
    first_user = next(m for m in cancel_requests[0]["messages"] if m["role"] == "user")
    assert RUN_TASK not in json.dumps(first_user)

    # The code action's `ask: true` was intercepted: the question was asked, and the prompt
    # holds it and the selected text.
    ask = result["scenarios"]["ask"]
    assert any("Ask agent about selection" in a for a in ask["actions"])
    assert ASK_ANSWER in ask["agentOutput"]
    assert len(ask_requests) == 1
    ask_user = next(m for m in ask_requests[0]["messages"] if m["role"] == "user")
    assert ASK_QUESTION in json.dumps(ask_user)
    assert "def add(a, b):" in json.dumps(ask_user)

    # A dismissed approval toast is a denial: no edit, the model is told, the run goes on.
    dismiss = result["scenarios"]["dismiss"]
    assert "return a * b" in dismiss["fileOnDisk"] and "a ** b" not in dismiss["editorText"]
    assert DISMISS_FINAL in dismiss["agentOutput"]
    assert "denied 1" in dismiss["agentOutput"]
    assert len(dismiss_requests) == 2

    # `Agent: Cancel Run` (agentLsp.cancel) stops a run too.
    palette_cancel = result["scenarios"]["paletteCancel"]
    assert "stop reason: cancelled" in palette_cancel["agentOutput"]
    assert palette_cancel["cancelMs"] < 10000, palette_cancel["cancelMs"]

    # Changing a machine-scoped (trust-boundary) setting restarts the server.
    restart = result["scenarios"]["restart"]
    assert any("restarting the server" in line for line in restart["log"]), restart["log"]

    assert (shots / "screenshot.png").is_file()
    if os.environ.get("AGENT_LSP_UPDATE_SCREENSHOT") == "1":
        for name in ("screenshot.png", "approval.png"):
            shutil.copy(shots / name, EXTENSION / name)
