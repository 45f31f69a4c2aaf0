"""The Emacs client (editor-clients/emacs/agent-lsp*.el, eglot) in a real `emacs --batch`
(Debian 12: Emacs 28 + eglot 1.9) against the real server and the scripted model: a run
approved (its diff shown first) and applied through eglot, a denial with a typed reason, a
cancel, a dismissed and an unanswered approval, rewind, resuming a session of an earlier
server, the model pick, plan then carry out, the health check, Flymake's diagnostics seen by
the agent, an MCP tool, a question on a region, and the byte-compilation.

The tests of approvals and cancel run with the client capabilities of the eglot of Emacs 28
(1.9, as it runs here), 29 and 30 (recorded in `emacs_driver.el`), which the server must all
ask with window/showMessageRequest.

Each test writes an elisp scenario that `emacs_driver.el` runs once the server is up; the
driver stubs the prompts (`completing-read-function`, the reason after Deny, y-or-n-p) and
writes a JSON result."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from editor_env import (
    SAMPLE_A,
    SCREENSHOT_SAMPLE,
    TmuxTerminal,
    agent_lsp_command,
    require,
    screenshot_replies,
)

from agent_lsp.testing.scripted_model import ScriptedModelServer

REPO = Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO / "editor-clients" / "emacs"
DRIVER = Path(__file__).with_name("emacs_driver.el")
EMACS = shutil.which("emacs")

require(EMACS, "emacs", "apt-get install -y --no-install-recommends emacs-nox elpa-eglot")


def _eglot_dir() -> str | None:
    out = subprocess.run(
        [EMACS, "-q", "--batch", "--eval",
         '(let ((f (locate-library "eglot"))) (princ (if f (file-name-directory f) "")))'],
        capture_output=True, text=True, timeout=30,
    ).stdout.strip()
    return out or None


EGLOT_DIR = _eglot_dir()
require(EGLOT_DIR, "eglot", "apt-get install -y --no-install-recommends elpa-eglot")


SESSION_SECONDS = 40  # the driver writes its result by then, whatever happens (a loaded machine)


@dataclasses.dataclass
class EmacsResult:
    returncode: int
    data: dict[str, Any]
    stdout: str
    stderr: str

    @property
    def errors(self) -> list[str]:
        return self.data.get("errors", [])

    @property
    def values(self) -> dict[str, Any]:
        return self.data.get("data") or {}

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.data.get("events", []) if kind is None or e.get("kind") == kind]

    def stop(self, run_id: str | None = None) -> dict[str, Any]:
        stops = [e for e in self.events("stop") if run_id is None or e["runId"] == run_id]
        assert stops, self.explain()
        return stops[0]

    def explain(self) -> str:
        keep = {k: v for k, v in self.data.items() if k not in ("eglotEvents", "messages")}
        return (f"emacs exited {self.returncode}\n--- result\n{json.dumps(keep, indent=1, ensure_ascii=False)[:12000]}"
                f"\n--- *Messages*\n{(self.data.get('messages') or '')[-4000:]}"
                f"\n--- eglot events (tail)\n{(self.data.get('eglotEvents') or '')[-6000:]}"
                f"\n--- emacs stderr (tail)\n{self.stderr[-4000:]}")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)  # the project root for project.el
    (ws / "a.py").write_text(SAMPLE_A, encoding="utf-8")
    (ws / "README.md").write_text("# sample\n", encoding="utf-8")
    return ws


@pytest.fixture
def model():
    with ScriptedModelServer() as srv:
        yield srv


CAPS = ["eglot-1.9", "emacs-29", "emacs-30"]  # the recorded sets in emacs_driver.el


def run_emacs(tmp_path: Path, workspace: Path, model: ScriptedModelServer, scenario: str, *,
              approval: dict[str, Any] | None = None, open_file: str | None = "a.py",
              flags: dict[str, Callable[[], bool]] | None = None,
              extra_env: dict[str, str] | None = None, caps: str = "eglot-1.9",
              settings: dict[str, Any] | None = None) -> EmacsResult:
    """Runs `scenario` in emacs, sending the client capabilities of the eglot `caps`; each of
    `flags` becomes the file flags/NAME once its condition holds (the scenario waits for it
    with `(t-flag "NAME")`). `settings` go over the test's `agent-lsp-settings`."""
    home = tmp_path / "home"
    for sub in ("config", "cache", "data", "state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    scenario_file = tmp_path / "scenario.el"
    scenario_file.write_text(";;; -*- lexical-binding: t; -*-\n" + textwrap.dedent(scenario), encoding="utf-8")
    result_file = tmp_path / "result.json"
    settings = {"model": "m", "baseUrl": model.base_url,
                "approval": {"default": "ask", **(approval or {})}, **(settings or {})}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_LSP_", "OPENAI_", "XDG_", "EMACS"))}
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "OPENAI_API_KEY": "test",
        "AGENT_LSP_STATE_DIR": str(tmp_path / "agent-state"),
        "EMACS_TEST_CLIENT": str(CLIENT_DIR),
        "EMACS_TEST_FILE": str(workspace / open_file) if open_file else "",
        "EMACS_TEST_COMMAND": json.dumps(agent_lsp_command("serve", "--stdio")),
        "EMACS_TEST_SETTINGS": json.dumps(settings),
        "EMACS_TEST_SCENARIO": str(scenario_file),
        "EMACS_TEST_RESULT": str(result_file),
        "EMACS_TEST_DEADLINE": str(SESSION_SECONDS),
        "EMACS_TEST_CAPS": caps,
    })
    env.update(extra_env or {})
    flag_dir = tmp_path / "flags"
    flag_dir.mkdir(exist_ok=True)
    env["EMACS_TEST_FLAGS"] = str(flag_dir)
    done = threading.Event()

    def watch() -> None:
        pending = dict(flags or {})
        while pending and not done.wait(0.02):
            for name, cond in list(pending.items()):
                if cond():
                    (flag_dir / name).touch()
                    del pending[name]

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # -q, not -Q: -Q skips site-start, which puts Debian's elpa-eglot on the load path
        proc = subprocess.run([EMACS, "-q", "--batch", "-l", str(DRIVER)], cwd=workspace, env=env,
                              capture_output=True, text=True, timeout=SESSION_SECONDS + 5,
                              stdin=subprocess.DEVNULL)
    finally:
        done.set()
        watcher.join()
    if not result_file.exists():
        raise AssertionError(f"emacs wrote no result (exit {proc.returncode})\n{proc.stderr[-6000:]}")
    data = json.loads(result_file.read_text(encoding="utf-8"))
    return EmacsResult(proc.returncode, data, proc.stdout, proc.stderr)


def process_gone(pid: int, within: float) -> bool:
    """True once `pid` no longer runs (a zombie waiting for its reaper counts as gone)."""
    deadline = time.monotonic() + within
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def tool_messages(model: ScriptedModelServer) -> list[str]:
    out = []
    for body in model.requests:
        for msg in body.get("messages", []):
            if msg.get("role") == "tool":
                content = msg.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content)
                out.append(content or "")
    return out


def user_texts(model: ScriptedModelServer) -> str:
    texts = []
    for body in model.requests:
        for msg in body.get("messages", []):
            if msg.get("role") == "user":
                content = msg.get("content")
                if isinstance(content, list):
                    content = "".join(p.get("text", "") for p in content)
                texts.append(content or "")
    return "\n".join(texts)


DOCSTRING_EDIT = {"name": "edit_file", "arguments": {
    "path": "a.py", "old_text": "def greet(name):", "new_text": '"""Greetings."""\n\n\ndef greet(name):'}}


def request_tools(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def all_messages_text(body: dict[str, Any]) -> str:
    out = []
    for msg in body.get("messages", []):
        content = msg.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content)
        out.append(content or "")
    return "\n".join(out)


@pytest.mark.parametrize("caps", CAPS)
def test_run_applies_the_approved_edit_through_eglot(tmp_path, workspace, model, caps):
    model.add("Add a module docstring", [
        {"text": "I'll add a module docstring to a.py.", "tool_calls": [DOCSTRING_EDIT]},
        {"tool_calls": [{"name": "write_file", "arguments": {
            "path": "pkg/new.py", "content": "NEW = 'é😀'\n"}}]},
        {"text": "Added the docstring to a.py."},
        {"text": "Yes, a.py has a docstring now."},  # the follow-up, same session
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer "Allow")
        (cl-letf (((symbol-function 'read-string)
                   (lambda (prompt &rest _) (t-set :read-prompt prompt)
                     "Add a module docstring to a.py")))
          (call-interactively #'agent-lsp-run))
        (t-wait 20 #'t-stop-event "the stop event")
        (t-set :buffer (t-buffer-text))
        (t-set :modified (buffer-modified-p t-buffer))
        (t-set :mode-line-after (agent-lsp-mode-line-string))
        (t-set :running-after (agent-lsp-running-runs))
        (t-set :stream-shown (and (get-buffer-window "*agent-lsp*") t))
        (let ((new (get-file-buffer (expand-file-name "pkg/new.py" (project-root (project-current))))))
          (t-set :new-buffer (and new (t-buffer-text new)))
          (t-set :new-modified (and new (buffer-modified-p new))))
        ;; a follow-up continues the session
        (agent-lsp-run "Does a.py have a docstring?")
        (t-wait 10 (lambda () (= 2 (length (t-events "stop")))) "the follow-up's stop")
    """, caps=caps)
    assert not res.errors, res.explain()
    assert res.values["managed"] is True, res.explain()  # agent-lsp manages the python buffer
    # what the recorded eglot sent, and the position encoding the server chose for it
    sent = res.values["capabilities"]
    assert sent.get("window") == ({"showDocument": {"support": True}, "workDoneProgress": True}
                                  if caps == "emacs-30" else None), sent.get("window")
    assert sent["experimental"] == {"agentLsp": {"diagnostics": True}}, sent["experimental"]
    assert res.values["position-encoding"] == ("utf-16" if caps == "eglot-1.9" else "utf-32"), res.values
    stop = res.stop()
    assert stop["report"]["stopReason"] == "done", res.explain()

    # the edit landed in the Emacs buffer through eglot, and the client saved it
    expected = '"""Greetings."""\n\n\n' + SAMPLE_A
    assert res.values["buffer"] == expected, res.explain()
    assert res.values["modified"] is None  # nil: saved
    assert (workspace / "a.py").read_text(encoding="utf-8") == expected
    edits = res.data["edits"]
    assert [e["answer"] for e in edits] == [{"applied": True}] * 2, res.explain()
    changes = edits[0]["edit"]["documentChanges"]
    assert changes[0]["textDocument"]["version"] is not None, edits  # versioned: an open document
    # eglot 1.9 has no resource operations: the new file came as a plain insert, got a
    # buffer and was saved (its directory created)
    assert "changes" in edits[1]["edit"] or all("kind" not in c for c in edits[1]["edit"]["documentChanges"])
    assert (workspace / "pkg" / "new.py").read_text(encoding="utf-8") == "NEW = 'é😀'\n"
    assert res.values["new-buffer"] == "NEW = 'é😀'\n" and res.values["new-modified"] is None

    # each approval was asked with the contract's actions and answered "Allow"
    prompts = res.data["prompts"]
    assert len(prompts) == 2, res.explain()
    assert prompts[0]["items"] == ["Allow", "Allow for session", "Always allow", "Deny"]  # Decision 27
    assert "edit_file" in prompts[0]["prompt"] and "a.py" in prompts[0]["prompt"]
    assert "write_file" in prompts[1]["prompt"] and "new.py" in prompts[1]["prompt"]
    assert [a["answer"] for a in res.data["approvalAnswers"]] == ["Allow", "Allow"]
    assert [e["state"] for e in res.events("approval")] == ["pending", "allowed"] * 2, res.explain()
    assert '(:title "Allow")' in res.data["eglotEvents"]
    # the edit's diff was shown (diff-mode) while the choice was asked
    assert prompts[0]["diffShown"] is True and prompts[0]["diffMode"] == "diff-mode", prompts[0]
    assert "--- a/a.py\n+++ b/a.py\n" in prompts[0]["diff"], prompts[0]["diff"]
    assert '+"""Greetings."""' in prompts[0]["diff"] and " def greet(name):" in prompts[0]["diff"]
    assert prompts[1]["diffShown"] is True and "+NEW = 'é😀'" in prompts[1]["diff"], prompts[1]

    # the run was started with the open document, in a new session
    assert res.values["read-prompt"] == "Agent task: "
    args = res.data["commands"][0]["arguments"][0]
    assert res.data["commands"][0]["command"] == "agentLsp.run"
    assert args["prompt"] == "Add a module docstring to a.py"
    assert args["textDocument"]["uri"] == (workspace / "a.py").as_uri()
    assert "sessionId" not in args
    follow_up = res.data["commands"][1]["arguments"][0]
    assert follow_up["sessionId"] == stop["report"]["sessionId"], res.data["commands"]
    assert res.events("stop")[1]["report"]["stopReason"] == "done"
    assert "Yes, a.py has a docstring now." in res.data["stream"]

    # the stream buffer shows the run live: text, tool call, approval, result, stop
    stream = res.data["stream"]
    assert f"## run {stop['runId']}: Add a module docstring to a.py" in stream, stream
    assert "I'll add a module docstring to a.py." in stream
    assert "Added the docstring to a.py." in stream
    assert "[tool] " in stream and "[approval: allowed]" in stream and "[result] " in stream
    assert "[stop: done]" in stream, stream
    assert "Not verified: a.py, pkg/new.py." in stream, stream  # what verified the run (issue 35)
    assert res.values["stream-shown"] is True
    seqs = [e["seq"] for e in res.events() if e["runId"] == stop["runId"]]
    assert seqs == list(range(len(seqs))), seqs

    # status in the mode line while running (eglot 1.9 drops $/progress), cleared after
    assert any(m.startswith("agent: ") for m in res.data["modeLines"]), res.data["modeLines"]
    # with the context fill (and no cost: no pricing set) of the running run
    assert any(re.search(r"^agent: ctx \d+k/128k · turn ", m) for m in res.data["modeLines"]), res.data["modeLines"]
    assert res.values["mode-line-after"] == ""
    assert res.values["running-after"] is None
    # Emacs quit: the server saw its stdin close and exited, leaving no orphan
    assert process_gone(res.values["server-pid"], within=5), "the server outlived Emacs"


def test_an_agent_edit_leaves_a_buffer_with_unsaved_changes_unsaved(tmp_path, workspace, model):
    """Decision 81: the client saves after an agent edit only buffers that were clean before it;
    the user's unsaved buffer stays unsaved and the model is told."""
    model.add("Add a module docstring", [
        {"tool_calls": [{**DOCSTRING_EDIT, "id": "e1"}]},
        {"text": "Added it."},
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (goto-char (point-max))
        (insert "# typed, not saved\n")
        (setq t-approval-answer "Allow")
        (agent-lsp-run "Add a module docstring to a.py")
        (t-wait 20 #'t-stop-event "the stop event")
        (t-set :buffer (t-buffer-text))
        (t-set :modified (and (buffer-modified-p t-buffer) t))
    """)
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    assert res.values["buffer"] == '"""Greetings."""\n\n\n' + SAMPLE_A + "# typed, not saved\n", res.explain()
    assert res.values["modified"] is True  # still the user's to save
    assert (workspace / "a.py").read_text(encoding="utf-8") == SAMPLE_A
    told = next(m["content"] for m in model.requests[1]["messages"] if m.get("tool_call_id") == "e1")
    assert "not saved: you were editing it" in told, told


@pytest.mark.parametrize("caps", CAPS)
def test_cancel_stops_a_running_run(tmp_path, workspace, model, caps):
    model.add("Count slowly", [{"text": "one two three", "ttft": 30}])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (agent-lsp-run "Count slowly to three")
        (t-wait 10 (lambda () (agent-lsp-running-runs)) "the run to start")
        (t-wait 10 (lambda () (t-events "status")) "a status event")
        ;; cancel once the model request is in flight: the server's event loop is
        ;; blocked while it first imports the openai SDK (seconds on a loaded machine)
        (t-wait 15 (lambda () (t-flag "requested")) "the model request")
        (t-set :mode-line-running (agent-lsp-mode-line-string))
        (t-set :mode-line-shown (t-format-mode-line mode-line-misc-info))
        (let ((t0 (float-time)))
          (call-interactively #'agent-lsp-cancel)
          (t-wait 8 #'t-stop-event "the stop event after agent-lsp-cancel")
          (t-set :cancel-seconds (- (float-time) t0)))
        (t-set :running-after (agent-lsp-running-runs))
        (t-set :mode-line-after (agent-lsp-mode-line-string))
        ;; M-x agent-lsp-restart: a new server process, managing the buffer again
        (agent-lsp-restart)
        (let ((server (agent-lsp--server)))
          (t-set :restarted-pid (and server (process-id (jsonrpc--process server))))
          (t-set :restarted-manages (and server (memq t-buffer (eglot--managed-buffers server)) t)))
    """, flags={"requested": lambda: len(model.log) >= 1}, caps=caps)
    assert not res.errors, res.explain()
    stop = res.stop()
    assert stop["report"]["stopReason"] == "cancelled", res.explain()
    assert res.values["cancel-seconds"] < 5, res.values
    assert res.values["mode-line-running"].startswith("agent: "), res.values
    # shown in the mode line (its `mode-line-misc-info` part), beside eglot's own entry
    shown = res.values["mode-line-shown"]
    assert f" [{res.values['mode-line-running']}] " in shown and "[eglot:ws]" in shown, shown
    assert res.values["running-after"] is None
    assert res.values["mode-line-after"] == ""
    cancels = [c for c in res.data["commands"] if c["command"] == "agentLsp.cancel"]
    assert cancels and cancels[0]["arguments"] == [{"runId": stop["runId"]}], res.data["commands"]
    assert "[stop: cancelled]" in res.data["stream"]
    assert res.values["restarted-pid"] not in (None, res.values["server-pid"]), res.values
    assert res.values["restarted-manages"] is True
    assert process_gone(res.values["server-pid"], within=5), "the old server outlived the restart"


def test_cancel_asks_which_run_when_several_run(tmp_path, workspace, model):
    model.add("First slow task", [{"text": "never", "ttft": 30}])
    model.add("Second slow task", [{"text": "never", "ttft": 30}])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (agent-lsp-run "First slow task")
        (t-wait 10 (lambda () (= 1 (length (agent-lsp-running-runs)))) "the first run")
        (agent-lsp-run "Second slow task")
        (t-wait 10 (lambda () (= 2 (length (agent-lsp-running-runs)))) "the second run")
        (t-set :runs (agent-lsp-running-runs))
        (t-wait 15 (lambda () (t-flag "requested")) "both model requests")
        (t-set :mode-line-running (agent-lsp-mode-line-string))
        ;; the picker offers both (newest first, the default); pick the older one
        (setq t-completing-read-answer
              (lambda (_prompt items) (car (last items))))
        (call-interactively #'agent-lsp-cancel)
        (t-wait 8 #'t-stop-event "the stop of the chosen run")
        (t-set :still-running (agent-lsp-running-runs))
        (agent-lsp-cancel (car (agent-lsp-running-runs)))
        (t-wait 8 (lambda () (= 2 (length (t-events "stop")))) "the second stop")
    """, flags={"requested": lambda: len(model.log) >= 2})
    assert not res.errors, res.explain()
    newest, oldest = res.values["runs"]
    picker = [p for p in res.data["prompts"] if "Cancel which" in p["prompt"]]
    assert len(picker) == 1 and len(picker[0]["items"]) == 2, res.data["prompts"]
    assert picker[0]["items"][0].startswith(newest) and "Second slow task" in picker[0]["items"][0]
    assert res.values["mode-line-running"].startswith("agent[2]: ")
    first_stop = res.events("stop")[0]
    assert first_stop["runId"] == oldest and first_stop["report"]["stopReason"] == "cancelled"
    assert res.values["still-running"] == [newest]
    assert res.stop(newest)["report"]["stopReason"] == "cancelled"


DENIABLE = [
    {"text": "Editing a.py.", "tool_calls": [DOCSTRING_EDIT]},
    {"text": "The edit was denied, so a.py is unchanged."},
]


@pytest.mark.parametrize("caps", CAPS)
def test_dismissed_approval_is_a_denial_and_the_run_goes_on(tmp_path, workspace, model, caps):
    model.add("Add a docstring", DENIABLE)
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer 'quit)   ; C-g in the approval prompt
        (agent-lsp-run "Add a docstring to a.py")
        (t-wait 20 #'t-stop-event "the stop event")
        (t-set :buffer (t-buffer-text))
        ;; an edit for another version of the buffer is refused as applied: false
        (t-set :stale (agent-lsp--apply-edit
                       `(:documentChanges
                         [(:textDocument (:uri ,(eglot--path-to-uri buffer-file-name)
                                          :version 999)
                           :edits [(:range (:start (:line 0 :character 0)
                                            :end (:line 0 :character 0))
                                    :newText "stale")])])))
    """, caps=caps)
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    assert res.stop()["report"]["denied"] == 1
    stale = res.values["stale"]
    assert stale["applied"] is False and "999" in stale["failureReason"], stale
    assert len(res.data["prompts"]) == 1
    assert [a["answer"] for a in res.data["approvalAnswers"]] == [None]
    # eglot 1.9 alone never answers a quit prompt; this client answers null at once
    assert ":result nil" in res.data["eglotEvents"].split("window/showMessageRequest", 1)[1], res.explain()
    assert [e["state"] for e in res.events("approval")] == ["pending", "denied"], res.explain()
    assert len(res.data["edits"]) == 1  # only the stale one above
    assert res.values["buffer"] == SAMPLE_A
    assert (workspace / "a.py").read_text(encoding="utf-8") == SAMPLE_A
    # the denial went back to the model as the tool result, and the run went on
    assert any("den" in m.lower() for m in tool_messages(model)), tool_messages(model)
    assert "The edit was denied, so a.py is unchanged." in res.data["stream"]


def test_unanswered_approval_is_denied_after_the_timeout(tmp_path, workspace, model):
    model.add("Add a docstring", DENIABLE)
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer 'hang)   ; the user never answers
        (agent-lsp-run "Add a docstring to a.py")
        (t-wait 20 #'t-stop-event "the stop event")
        (t-set :buffer (t-buffer-text))
    """, approval={"timeout": 2})
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    assert res.stop()["report"]["denied"] == 1
    # the server gave up after approval.timeout and withdrew the request ($/cancelRequest):
    # the client closed its prompt then, answering null
    states = [e["state"] for e in res.events("approval")]
    assert states == ["pending", "withdrawn"], states
    prompt_at = res.data["prompts"][0]["t"]
    closed_at = res.data["approvalAnswers"][0]["t"]
    assert res.data["approvalAnswers"][0]["answer"] is None
    assert 1.5 <= closed_at - prompt_at < 4, (prompt_at, closed_at)
    assert "$/cancelRequest" in res.data["eglotEvents"]
    # the stream went on while the prompt was open: nothing lost, in order
    seqs = [e["seq"] for e in res.events()]
    assert seqs == list(range(len(seqs))), seqs
    assert res.data["edits"] == []
    assert (workspace / "a.py").read_text(encoding="utf-8") == SAMPLE_A
    assert any("den" in m.lower() or "withdr" in m.lower() or "timed out" in m.lower()
               for m in tool_messages(model)), tool_messages(model)
    assert "The edit was denied, so a.py is unchanged." in res.data["stream"]


def test_ask_region_sends_the_range_in_utf16(tmp_path, workspace, model):
    model.add("What does this line do", [{"text": "It builds the greeting."},
                                          {"text": "Code action answer."}])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (transient-mark-mode 1)
        ;; from just after the emoji on line 2 to the end of "return" on line 3
        (goto-char (point-min))
        (search-forward "😀")
        (push-mark (point) t t)
        (search-forward "return")
        (cl-letf (((symbol-function 'read-string)
                   (lambda (&rest _) "What does this line do?")))
          (call-interactively #'agent-lsp-ask-region))
        (t-wait 20 #'t-stop-event "the stop event")
        ;; the "Ask agent about selection" code action asks for the question first
        (setq t-completing-read-answer
              (lambda (_prompt items)
                (seq-find (lambda (i) (string-prefix-p "Ask agent" i)) items)))
        (goto-char (point-min))
        (cl-letf (((symbol-function 'read-string)
                   (lambda (&rest _) "Why the emoji?")))
          ;; a keyboard invocation (eglot pops up a mouse menu otherwise)
          (let ((last-nonmenu-event ?\r))
            (eglot-code-actions (line-beginning-position 2) (line-end-position 2) nil t)))
        (t-wait 10 (lambda () (= 2 (length (t-events "stop")))) "the code action's run")
    """)
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    args = res.data["commands"][0]["arguments"][0]
    line2 = SAMPLE_A.splitlines()[1]
    col = len(line2[: line2.index("😀") + 1].encode("utf-16-le")) // 2
    assert args["range"] == {"start": {"line": 1, "character": col},
                             "end": {"line": 2, "character": len("    return")}}, args
    assert args["textDocument"]["uri"] == (workspace / "a.py").as_uri()
    assert args["question"] == "What does this line do?" and "prompt" not in args, args
    # the server quoted the region it holds (Eglot's copy of the buffer)
    first = [m["content"] for m in model.requests[0]["messages"] if m["role"] == "user"][-1]
    assert first.startswith("What does this line do?\n\nSelected text in a.py (lines 2-3):\n```python\n"), first
    assert ' " + name\n    return\n```' in first, first
    assert "## run " in res.data["stream"] and ": What does this line do?" in res.data["stream"]
    assert "It builds the greeting." in res.data["stream"]
    # the code action: the question goes as `question` with the action's range; the server words it
    action = res.data["commands"][1]["arguments"][0]
    assert action["question"] == "Why the emoji?" and "prompt" not in action, action
    assert "ask" not in action and "selectionInPrompt" not in action, action
    second = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"][-1]
    assert second.startswith("Why the emoji?\n\nSelected text in a.py (line 2):\n```python\n"), second
    assert "😀" in second, second
    assert action["range"]["start"] == {"line": 1, "character": 0}
    assert ": Why the emoji?" in res.data["stream"] and "Code action answer." in res.data["stream"]


@pytest.mark.parametrize("caps", CAPS)
def test_denied_edit_sends_the_typed_reason(tmp_path, workspace, model, caps):
    model.add("Add a docstring", DENIABLE)
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer "Deny"
              t-reason-answer "  use a one-line comment instead ")
        (agent-lsp-run "Add a docstring to a.py")
        (t-wait 20 #'t-stop-event "the stop event")
        (t-set :buffer (t-buffer-text))
        (t-set :diff-window-after (and (get-buffer-window "*agent-lsp diff*" t) t))
    """, caps=caps)
    assert not res.errors, res.explain()
    report = res.stop()["report"]
    assert report["stopReason"] == "done" and report["denied"] == 1, res.explain()
    approval, reason = res.data["prompts"]
    assert approval["diffShown"] is True and "+++ b/a.py" in approval["diff"], approval
    assert reason["prompt"].startswith("[agent-lsp] Why deny?"), reason
    assert res.values["diff-window-after"] is None  # the diff closed with the answer
    assert '(:title "Deny" :reason "use a one-line comment instead")' in res.data["eglotEvents"], res.explain()
    assert [e["state"] for e in res.events("approval")] == ["pending", "denied"]
    # the model's next request carries the reason in the tool result
    assert any("the user's reason: use a one-line comment instead" in m for m in tool_messages(model)), tool_messages(model)
    assert res.values["buffer"] == SAMPLE_A
    assert (workspace / "a.py").read_text(encoding="utf-8") == SAMPLE_A


def test_rewind_restores_the_buffer_and_the_file(tmp_path, workspace, model):
    model.add("Add a module docstring", [
        {"text": "Editing.", "tool_calls": [DOCSTRING_EDIT]},
        {"text": "Done."},
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (agent-lsp-run "Add a module docstring to a.py")
        (t-wait 20 #'t-stop-event "the stop event")
        (t-set :edited (t-buffer-text))
        ;; M-x agent-lsp-rewind: the newest rewindable run is offered first
        (setq t-completing-read-answer (lambda (_prompt items) (car items)))
        (let ((result (call-interactively #'agent-lsp-rewind)))
          (t-set :result result)
          (t-set :buffer (t-buffer-text))
          (t-set :modified (buffer-modified-p t-buffer))
          (t-set :disk (with-temp-buffer (insert-file-contents (buffer-file-name t-buffer))
                                         (buffer-string)))
          ;; the rewind is itself rewindable: that puts the edit back
          (t-set :again (agent-lsp-rewind (plist-get result :rewindId)))
          (t-set :buffer-again (t-buffer-text)))
    """)
    assert not res.errors, res.explain()
    stop = res.stop()
    assert stop["report"]["rewindable"] is True, stop
    expected = '"""Greetings."""\n\n\n' + SAMPLE_A
    assert res.values["edited"] == expected
    picker = [p for p in res.data["prompts"] if "Rewind which" in p["prompt"]]
    assert picker and picker[0]["items"][0].startswith(stop["runId"]) and "1 file: a.py" in picker[0]["items"][0], picker
    result = res.values["result"]
    assert result["restored"] == [(workspace / "a.py").as_uri()] and not result["conflicts"], result
    # back in the buffer, saved to disk
    assert res.values["buffer"] == SAMPLE_A and res.values["modified"] is None, res.explain()
    assert res.values["disk"] == SAMPLE_A
    assert f"## rewind of {stop['runId']}\n    restored: a.py" in res.data["stream"], res.data["stream"]
    assert res.values["again"]["restored"] == [(workspace / "a.py").as_uri()], res.values["again"]
    assert res.values["buffer-again"] == expected
    assert (workspace / "a.py").read_text(encoding="utf-8") == expected


def test_prompts_name_their_choices_and_their_default(tmp_path, workspace, model):
    """Issue 21.29: the approval prompt lists the choices and says what RET does (Allow);
    the rewind picker names its default, the newest rewindable run, and RET takes it."""
    model.add("Add a module docstring", [  # the second run follows up in the same session
        {"text": "Editing.", "tool_calls": [DOCSTRING_EDIT]}, {"text": "Done."},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "n\n"}}]}, {"text": "Done."}])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer "Allow")
        (agent-lsp-run "Add a module docstring to a.py")
        (t-wait 20 #'t-stop-event "the first stop")
        (agent-lsp-run "Create notes.txt")
        (t-wait 20 (lambda () (= 2 (length (t-events "stop")))) "the second stop")
        ;; RET on an empty minibuffer: completing-read's default
        (setq t-completing-read-answer (lambda (_prompt _items) ""))
        (t-set :rewound (call-interactively #'agent-lsp-rewind))
    """)
    assert not res.errors, res.explain()
    approvals = [p["prompt"] for p in res.data["prompts"] if p["prompt"].startswith("[agent-lsp]")]
    assert approvals and approvals[0].endswith(  # with "Always allow" (Decision 27)
        "\nChoose Allow / Allow for session / Always allow / Deny (RET = Allow, C-g denies): "), approvals
    newest = res.events("stop")[1]["runId"]
    picker = [p["prompt"] for p in res.data["prompts"] if "Rewind which" in p["prompt"]]
    assert picker == [f"Rewind which agent run (default {newest}, Create notes.txt): "], picker
    assert f"## rewind of {newest}" in res.data["stream"], res.data["stream"]  # RET took the newest run


def test_resume_a_session_of_an_earlier_server(tmp_path, workspace, model):
    model.add("Remember the word PAPAYA", [{"text": "Noted: PAPAYA."}, {"text": "The word was PAPAYA."}])
    first = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (agent-lsp-run "Remember the word PAPAYA")
        (t-wait 20 #'t-stop-event "the stop event")
    """)
    assert not first.errors, first.explain()
    session = first.stop()["report"]["sessionId"]
    # a new Emacs, a new server process, the same state dir (AGENT_LSP_STATE_DIR)
    second = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-completing-read-answer (lambda (_prompt items) (car items)))
        (t-set :resumed (call-interactively #'agent-lsp-sessions))
        (agent-lsp-run "Which word did I ask you to remember?")
        (t-wait 20 #'t-stop-event "the stop event")
    """)
    assert not second.errors, second.explain()
    assert second.values["server-pid"] != first.values["server-pid"]
    assert second.values["resumed"] == session
    picker = [p for p in second.data["prompts"] if "Resume which" in p["prompt"]]
    assert picker[0]["items"][0].startswith("Remember the word PAPAYA"), picker
    assert "1 run, done)" in picker[0]["items"][0], picker
    run_args = [c["arguments"][0] for c in second.data["commands"] if c["command"] == "agentLsp.run"]
    assert run_args[0]["sessionId"] == session, run_args
    assert second.stop()["report"]["sessionId"] == session
    # the model's first request of the resumed run holds the earlier conversation
    text = all_messages_text(model.requests[-1])
    assert "Remember the word PAPAYA" in text and "Noted: PAPAYA." in text and "Which word did I ask" in text, text
    assert "The word was PAPAYA." in second.data["stream"]


def test_command_picker_runs_a_prompt_file_with_its_arguments(tmp_path, workspace, model):
    """Issue 24: agent-lsp-command offers agentLsp.commands with completing-read, reads the
    arguments with the command's hint, and runs `/name args`; the server expands the file."""
    commands = workspace / ".claude" / "commands" / "docs"
    commands.mkdir(parents=True)
    (commands / "explain.md").write_text("---\ndescription: Explain a function\nargument-hint: <function>\n---\n"
                                         "Explain the function $1 simply.\n")
    model.add("Explain the function", [{"text": "It greets."}])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-completing-read-answer (lambda (_prompt items) (car items)))
        (setq t-read-string-answer (lambda (_prompt) "greet"))
        (call-interactively #'agent-lsp-command)
        (t-wait 20 #'t-stop-event "the stop event")
    """)
    assert not res.errors, res.explain()
    picker = [p for p in res.data["prompts"] if p["prompt"] == "Run which agent command: "]
    assert picker[0]["items"] == ["/docs:explain <function>  Explain a function (project)"], picker
    assert any(p["prompt"] == "/docs:explain <function>: " for p in res.data["prompts"]), res.data["prompts"]
    run_args = [c["arguments"][0] for c in res.data["commands"] if c["command"] == "agentLsp.run"]
    assert run_args[0]["prompt"] == "/docs:explain greet", run_args
    user = [m for m in model.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert user.startswith("Explain the function greet simply."), user
    assert res.stop()["report"]["stopReason"] == "done"


def test_picked_model_is_used_by_the_next_run(tmp_path, workspace, model):
    model.add("Say hi", [{"text": "hi"}])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (t-set :health-before (agent-lsp-check-health))
        (setq t-completing-read-answer
              (lambda (_prompt items) (car (member "scripted" items))))
        (t-set :picked (call-interactively #'agent-lsp-pick-model))
        (t-set :health-after (agent-lsp-check-health))
        (agent-lsp-run "Say hi")
        (t-wait 20 #'t-stop-event "the stop event")
    """)
    assert not res.errors, res.explain()
    # the configured model ("m") is not offered by the endpoint: the health check says so
    before = {f["what"]: f for f in res.values["health-before"]}
    assert before["endpoint"]["level"] == "ok", before  # the server's checks (agentLsp.health)
    assert before["model"]["level"] == "fail" and "m is not among the endpoint's models (e.g. scripted)" in before["model"]["detail"], before
    assert "agent-lsp-pick-model" in before["model"]["detail"], before
    assert {"settings file", "API key", "ripgrep", "sandbox"} <= set(before), before
    picker = [p for p in res.data["prompts"] if "Model for the next" in p["prompt"]]
    assert picker[0]["items"] == ["scripted"] and "(now m)" in picker[0]["prompt"], picker
    assert res.values["picked"] == "scripted"
    after = {f["what"]: f for f in res.values["health-after"]}
    assert after["model"]["level"] == "ok", after
    run_args = [c["arguments"][0] for c in res.data["commands"] if c["command"] == "agentLsp.run"]
    assert run_args[0]["model"] == "scripted", run_args
    assert model.requests[-1]["model"] == "scripted"
    assert res.stop()["report"]["stopReason"] == "done"


def test_health_check_names_an_unreachable_endpoint(tmp_path, workspace, model):
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (t-set :findings (agent-lsp-check-health))
        (t-set :report (t-buffer-string-or-nil "*agent-lsp health*"))
    """, settings={"baseUrl": "http://127.0.0.1:9/v1"})
    assert not res.errors, res.explain()
    findings = {f["what"]: f for f in res.values["findings"]}
    assert findings["server program"]["level"] == "ok" and findings["server"]["level"] == "ok", findings
    endpoint = findings["endpoint"]
    assert endpoint["level"] == "fail" and "127.0.0.1:9" in endpoint["detail"], endpoint
    assert "FAIL  endpoint: " in res.values["report"], res.values["report"]
    assert re.search(r"agent-lsp health: endpoint: .*127\.0\.0\.1:9", res.data["messages"]), res.data["messages"]


def test_setup_shows_what_was_found(tmp_path, workspace, model):
    """M-x agent-lsp-setup shows agentLsp.setup's answer grouped in *agent-lsp setup*: a project
    hook waiting for consent and its allow rule, a user skill, a command, the memory files, and a malformed file
    named with its error (issue 24, Decision 37)."""
    claude = Path(os.environ["CLAUDE_CONFIG_DIR"])
    (claude / "skills" / "style").mkdir(parents=True)
    (claude / "skills" / "style" / "SKILL.md").write_text("---\nname: style\ndescription: House style.\n---\nx\n")
    (workspace / ".claude" / "commands").mkdir(parents=True)
    (workspace / ".claude" / "commands" / "explain.md").write_text("---\ndescription: Explain code\n---\nx\n")
    bad = workspace / ".claude" / "commands" / "bad.md"
    bad.write_text("---\ndescription: [unclosed\n---\nx\n")
    (workspace / ".claude" / "settings.json").write_text(json.dumps(
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "make check"}]}]},
         "permissions": {"allow": ["Bash(make:*)"]}}))
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (t-set :problems (length (plist-get (call-interactively #'agent-lsp-setup) :problems)))
        (t-set :report (t-buffer-string-or-nil "*agent-lsp setup*"))
    """)
    assert not res.errors, res.explain()
    report = res.values["report"]
    settings_file = workspace / ".claude" / "settings.json"
    for line in (f"  needs-consent Stop: make check  (project: {settings_file})\n",
                 f"  style: House style.  (user: {(claude / 'skills' / 'style' / 'SKILL.md').resolve()})\n",
                 "  explain: Explain code  (project: ", f"  absent        {workspace / 'AGENTS.md'}\n",
                 f"  needs-consent allow Bash(make:*)  (project: {settings_file})\n",
                 "MCP servers: none\n"):
        assert line in report, report
    assert f"  FAIL {bad.resolve()}: bad YAML in the front matter" in report, report
    assert res.values["problems"] == 1
    assert f"agent-lsp setup: {bad.resolve()}: bad YAML" in res.data["messages"], res.data["messages"]


def test_plan_then_carry_out(tmp_path, workspace, model):
    model.add("Plan a module docstring", [
        {"text": "1. Add a module docstring to a.py."},
        {"text": "Carrying it out.", "tool_calls": [DOCSTRING_EDIT]},
        {"text": "Done."},
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (cl-letf (((symbol-function 'read-string)
                   (lambda (prompt &rest _) (t-set :plan-prompt prompt)
                     "Plan a module docstring for a.py")))
          (call-interactively #'agent-lsp-plan))
        (t-wait 20 #'t-stop-event "the plan's stop")
        (call-interactively #'agent-lsp-carry-out-plan)
        (t-wait 20 (lambda () (= 2 (length (t-events "stop")))) "the follow-up's stop")
        (t-set :buffer (t-buffer-text))
    """)
    assert not res.errors, res.explain()
    plan_stop, follow_stop = res.events("stop")
    assert plan_stop["report"]["stopReason"] == "done" and follow_stop["report"]["stopReason"] == "done", res.explain()
    runs = [c["arguments"][0] for c in res.data["commands"] if c["command"] == "agentLsp.run"]
    assert runs[0]["mode"] == "plan" and runs[0]["prompt"] == "Plan a module docstring for a.py", runs
    assert runs[1] == {"carryOutPlan": True, "sessionId": plan_stop["report"]["sessionId"]}, runs
    carried = [m["content"] for m in model.requests[1]["messages"] if m["role"] == "user"][-1]
    assert carried == "Carry out the plan above.", carried  # the server's follow-up reached the model
    # the plan run offers no edit or command tools; the follow-up offers them all
    plan_tools, follow_tools = request_tools(model.requests[0]), request_tools(model.requests[1])
    assert "read_file" in plan_tools and not plan_tools & {"edit_file", "write_file", "run_command", "remember"}, plan_tools
    assert {"edit_file", "write_file", "run_command"} <= follow_tools, follow_tools
    assert "1. Add a module docstring to a.py." in all_messages_text(model.requests[1])
    assert res.values["buffer"] == '"""Greetings."""\n\n\n' + SAMPLE_A
    stream = res.data["stream"]
    assert f"## plan {plan_stop['runId']}: Plan a module docstring for a.py" in stream, stream
    assert "Plan ready: M-x agent-lsp-carry-out-plan" in stream, stream
    assert f"Carry out the plan of {plan_stop['runId']}" in stream


def test_the_agent_sees_flymake_diagnostics(tmp_path, workspace, model):
    model.add("Check the problems", [
        {"tool_calls": [{"name": "diagnostics", "arguments": {"path": "a.py"}}]},
        {"tool_calls": [DOCSTRING_EDIT]},
        {"text": "Checked."},
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        ;; a Flymake backend of the test: one warning on the emoji
        (defun t-lint (report-fn &rest _)
          (save-excursion
            (goto-char (point-min))
            (funcall report-fn
                     (and (search-forward "😀" nil t)
                          (list (flymake-make-diagnostic
                                 (current-buffer) (match-beginning 0) (match-end 0)
                                 :warning "an emoji in a greeting"))))))
        (add-hook 'flymake-diagnostic-functions #'t-lint nil t)
        (flymake-mode 1)
        (flymake-start)
        (t-wait 5 #'flymake-diagnostics "Flymake's diagnostic")
        (defvar t-answers nil)
        (advice-add 'agent-lsp--diagnostics-answer :filter-return
                    (lambda (answer) (push answer t-answers) answer))
        (agent-lsp-run "Check the problems in a.py")
        (t-wait 20 #'t-stop-event "the stop event")
        (t-set :answers (reverse t-answers))
    """)
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    assert "diagnostics" in request_tools(model.requests[0])
    line = SAMPLE_A.splitlines()[1]
    col = len(line[: line.index("😀")].encode("utf-16-le")) // 2  # 0-based, UTF-16
    first = res.values["answers"][0][0]
    assert first["uri"] == (workspace / "a.py").as_uri()
    assert first["diagnostics"] == [{
        "range": {"start": {"line": 1, "character": col}, "end": {"line": 1, "character": col + 2}},
        "severity": 2, "message": "an emoji in a greeting", "source": "t-lint"}], first
    results = [m["content"] for m in model.requests[-1]["messages"] if m.get("role") == "tool"]
    assert f"a.py:2:{col + 1}: warning: an emoji in a greeting (t-lint)" in results[0], results
    # the edit's result: what Flymake shows once it checked the edited text
    assert "the editor now shows in a.py:" in results[1] and f"a.py:5:{col + 1}: warning" in results[1], results


def test_mcp_tool_runs_after_approval(tmp_path, workspace, model):
    server = (Path(os.environ.get("AGENT_LSP_CACHE") or Path.home() / ".cache" / "agent-lsp-ci")
              / "mcp" / "venv" / "bin" / "mcp-server-time")
    if not server.exists():
        require(None, "mcp-server-time", "bash tests/mcp/setup.sh")
    model.add("What time is it", [
        {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"text": "It is now."},
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer "Allow")
        (agent-lsp-run "What time is it in UTC?")
        (t-wait 20 #'t-stop-event "the stop event")
    """, settings={"mcpServers": {"time": {"command": str(server)}}},
        # the tool is read-only (readOnlyHint) from the user's own server: ask anyway
        approval={"tools": {"time__get_current_time": "ask"}})
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    assert "time__get_current_time" in request_tools(model.requests[0])
    approvals = [p for p in res.data["prompts"] if p["prompt"].startswith("[agent-lsp]")]
    assert approvals and "time__get_current_time" in approvals[0]["prompt"], res.data["prompts"]
    assert approvals[0]["diffShown"] is None  # no diff for a tool that edits nothing
    results = tool_messages(model)
    assert results and '"timezone": "UTC"' in results[-1] and "datetime" in results[-1], results


OTHER_SERVER = """
from pygls.lsp.server import LanguageServer

LanguageServer("other-ls", "1.0").start_io()
"""


def test_starts_beside_the_buffers_own_language_server(tmp_path, workspace, model):
    """eglot 1.9 has one server per major mode and project: with another server managing the
    python buffers, agent-lsp starts beside it (managing no buffers) instead of replacing it,
    and its edits still land in the buffer, through the other server's document sync."""
    other = tmp_path / "other_ls.py"
    other.write_text(OTHER_SERVER, encoding="utf-8")
    model.add("Add a module docstring", [
        {"text": "Editing.", "tool_calls": [DOCSTRING_EDIT]},
        {"text": "Done."},
    ])
    res = run_emacs(tmp_path, workspace, model, rf"""
        (set-buffer t-buffer)
        (let ((eglot-sync-connect t))
          (eglot '(python-mode) (project-current) 'eglot-lsp-server
                 (list "{sys.executable}" "{other}") "python"))
        (t-wait 15 (lambda () (eglot-current-server)) "the other server")
        (let ((other (eglot-current-server)))
          (setq t-server (agent-lsp-start))
          (t-set :other-alive (and (jsonrpc-running-p other) t))
          (t-set :current-is-other (eq (eglot-current-server) other))
          (t-set :agent-manages (length (eglot--managed-buffers t-server)))
          (setq t-approval-answer "Allow")
          (agent-lsp-run "Add a module docstring to a.py")
          (t-wait 20 #'t-stop-event "the stop event")
          (t-set :other-alive-after (and (jsonrpc-running-p other) t))
          (t-set :buffer (t-buffer-text))
          (t-set :modified (buffer-modified-p)))
    """, extra_env={"EMACS_TEST_NO_START": "1"})
    assert not res.errors, res.explain()
    assert res.values["other-alive"] is True and res.values["current-is-other"] is True
    assert res.values["agent-manages"] == 0
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    expected = '"""Greetings."""\n\n\n' + SAMPLE_A
    assert res.values["buffer"] == expected and res.values["modified"] is None, res.explain()
    assert (workspace / "a.py").read_text(encoding="utf-8") == expected
    assert res.values["other-alive-after"] is True
    # not open on the agent's server: an unversioned edit
    assert res.data["edits"][0]["edit"]["documentChanges"][0]["textDocument"]["version"] is None



TERMINAL_INIT = r"""
;;; -*- lexical-binding: t; -*-
(setq inhibit-startup-screen t make-backup-files nil create-lockfiles nil
      auto-save-default nil enable-local-variables nil frame-background-mode 'dark
      ;; a person's config on a short terminal: room for the file, the stream and the diff
      split-height-threshold 12
      ;; no native compilation of ELPA packages in the background, no *Warnings* window
      native-comp-deferred-compilation nil native-comp-async-report-warnings-errors nil)
(menu-bar-mode -1)
(add-to-list 'load-path (getenv "EMACS_TEST_CLIENT"))
(require 'eglot)
(require 'agent-lsp)
(setq agent-lsp-server-command (append (json-parse-string (getenv "EMACS_TEST_COMMAND")) nil)
      agent-lsp-settings (json-parse-string (getenv "EMACS_TEST_SETTINGS") :object-type 'plist
                                            :null-object nil :false-object :json-false))
(find-file (getenv "EMACS_TEST_FILE"))
(agent-lsp-start)
"""


class TmuxEmacs(TmuxTerminal):
    """`emacs -nw` in a detached tmux session of its own (own socket, no user config)."""

    def __init__(self, init: Path, *, cwd: Path, env: dict[str, str], cols: int, rows: int) -> None:
        super().__init__("emacs", [EMACS, "-nw", "-q", "-l", str(init)], cwd=cwd, env=env, cols=cols, rows=rows)


def test_screenshots_in_a_terminal(tmp_path, workspace, model):
    """A person's view: `emacs -nw` in tmux, M-x agent-lsp-run typed, the edit's diff shown
    while the approval is asked (RET: Allow), then M-x agent-lsp-rewind putting the file back.
    Saved as PNGs; AGENT_LSP_UPDATE_SCREENSHOT=1 copies them to the client's folder."""
    pytest.importorskip("PIL")
    if not shutil.which("tmux"):
        pytest.skip("tmux not installed")
    import nvim_harness  # the terminal-to-PNG renderer the Neovim screenshots use

    (workspace / "a.py").write_text(SCREENSHOT_SAMPLE, encoding="utf-8")
    model.add("Add a module docstring", screenshot_replies())
    init = tmp_path / "terminal.el"
    init.write_text(TERMINAL_INIT, encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_LSP_", "OPENAI_", "XDG_", "EMACS", "TMUX"))}
    env.update({
        "HOME": str(home), "OPENAI_API_KEY": "test", "COLORTERM": "truecolor",
        "AGENT_LSP_STATE_DIR": str(tmp_path / "agent-state"),
        "EMACS_TEST_CLIENT": str(CLIENT_DIR), "EMACS_TEST_FILE": str(workspace / "a.py"),
        "EMACS_TEST_COMMAND": json.dumps(agent_lsp_command("serve", "--stdio")),
        "EMACS_TEST_SETTINGS": json.dumps({"model": "m", "baseUrl": model.base_url,
                                           "pricing": {"m": {"inputPerMTok": 2.5, "outputPerMTok": 10}}}),
    })
    cols, rows = 124, 40
    term = TmuxEmacs(init, cwd=workspace, env=env, cols=cols, rows=rows)
    try:
        assert term.wait_for("[eglot:ws]", 30), term.screen()
        term.send_keys("M-x")
        term.send_keys("agent-lsp-run", "Enter")
        assert term.wait_for("Agent task:", 10), term.screen()
        term.send_keys("Add a module docstring to a.py", "Enter")
        assert term.wait_for("(RET = Allow, C-g denies)", 40) and term.wait_for("+++ b/a.py", 5), term.screen()
        approval_text = term.screen()
        approval = term.screen(ansi=True)
        term.send_keys("Enter")  # the default: Allow
        assert term.wait_for("[stop: done]", 40), term.screen()
        term.send_keys("M-x")
        term.send_keys("agent-lsp-rewind", "Enter")
        assert term.wait_for("Rewind which agent run (default r-", 20), term.screen()
        term.send_keys("Enter")
        # the whole frame redrawn: the stream's note and the file as it was
        assert term.wait_until(lambda screen: "## rewind of r-" in screen and "restored: a.py" in screen
                               and '"""Greetings' not in screen, 20), term.screen()
        rewound_text = term.screen()
        rewound = term.screen(ansi=True)
    finally:
        term.close()
    assert '+"""Greetings and farewells."""' in approval_text and "*agent-lsp diff*" in approval_text, approval_text
    assert "[agent: ctx 31k/128k · $0.0" in approval_text and "*agent-lsp*" in approval_text, approval_text
    assert "## rewind of r-" in rewound_text, rewound_text
    assert (workspace / "a.py").read_text(encoding="utf-8") == SCREENSHOT_SAMPLE  # rewound, and saved
    for name, ansi in {"screenshot-diff.png": approval, "screenshot-rewind.png": rewound}.items():
        nvim_harness.render_png(ansi, tmp_path / name, cols=cols, rows=rows)
        assert (tmp_path / name).stat().st_size > 10_000
        if os.environ.get("AGENT_LSP_UPDATE_SCREENSHOT") == "1":
            shutil.copy(tmp_path / name, CLIENT_DIR / name)


def test_byte_compiles_without_warnings(tmp_path):
    sources = sorted(CLIENT_DIR.glob("*.el"))
    assert len(sources) >= 2 and all(len(p.read_text().splitlines()) < 1000 for p in sources)
    for src in sources:
        shutil.copy(src, tmp_path / src.name)
    proc = subprocess.run(
        [EMACS, "-Q", "--batch", "-L", EGLOT_DIR, "-L", str(tmp_path),
         "--eval", "(setq byte-compile-error-on-warn t)",
         "-f", "batch-byte-compile", *(src.name for src in sources)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert all((tmp_path / (src.stem + ".elc")).exists() for src in sources)
    assert "Warning" not in proc.stderr, proc.stderr


def test_settings_become_nested_camel_case_init_options(tmp_path):
    script = r"""
    (require 'agent-lsp)
    (setq agent-lsp-settings
          '(:model "gpt-4.1-mini" :base-url "http://localhost:11434/v1"
            :approval (:default "ask" :allow-commands ("pytest" "git status") :timeout 30)
            :memoryFiles ["AGENTS.md"] :flag :json-false))
    (princ (json-serialize (agent-lsp-initialization-options)
                           :null-object nil :false-object :json-false))
    (terpri)
    (setq agent-lsp-settings nil)
    (princ (json-serialize (agent-lsp-initialization-options)))
    (terpri)
    (let ((server (make-instance 'agent-lsp-server :process (make-pipe-process :name "x"))))
      (setf (eglot--project server) `(transient . ,default-directory))
      (let ((caps (eglot-client-capabilities server)))
        (princ (json-serialize (list :window (or (plist-get caps :window) :null)
                                     :experimental (plist-get caps :experimental))
                               :false-object :json-false))))
    (terpri)
    ;; user names (models, MCP servers, tools, variables) are sent as written
    (setq agent-lsp-settings
          '(:pricing (:gpt-4.1-mini (:inputPerMTok 0.4 :output-per-m-tok 1.6))
            :mcp-servers ((my-server . ((command . "srv") (args "--x" "y")
                                        (env . (("API_TOKEN" . "t"))))))
            :approval (:tools (:time__get_current_time "allow"))
            :sandbox (:mode "workspace-write" :network :json-false)
            :mcp (:workspace-servers "deny")))
    (princ (json-serialize (agent-lsp-initialization-options) :false-object :json-false))
    (terpri)
    ;; an mcpServers block pasted as JSON text from another tool
    (setq agent-lsp-settings
          '(:mcpServers "{\"mcpServers\": {\"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\"]}}}"))
    (princ (json-serialize (agent-lsp-initialization-options) :false-object :json-false))
    (terpri)
    ;; a project's local value never reaches the server
    (with-temp-buffer
      (setq-local agent-lsp-settings '(:baseUrl "http://evil.example/v1"))
      (princ (json-serialize (agent-lsp-initialization-options) :false-object :json-false)))
    """
    proc = subprocess.run(
        [EMACS, "-q", "--batch", "-L", str(CLIENT_DIR), "--eval", f"(progn {script})"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    first, second, third, fourth, fifth, sixth = proc.stdout.splitlines()[:6]
    assert json.loads(first) == {
        "model": "gpt-4.1-mini", "baseUrl": "http://localhost:11434/v1",
        "approval": {"default": "ask", "allowCommands": ["pytest", "git status"], "timeout": 30},
        "memoryFiles": ["AGENTS.md"], "flag": False,
    }
    assert json.loads(second) == {}
    # window stays eglot's own (1.9: none); ours: experimental.agentLsp.diagnostics
    assert json.loads(third) == {"window": None, "experimental": {"agentLsp": {"diagnostics": True}}}
    assert json.loads(fourth) == {
        "pricing": {"gpt-4.1-mini": {"inputPerMTok": 0.4, "output-per-m-tok": 1.6}},
        "mcpServers": {"my-server": {"command": "srv", "args": ["--x", "y"], "env": {"API_TOKEN": "t"}}},
        "approval": {"tools": {"time__get_current_time": "allow"}},
        "sandbox": {"mode": "workspace-write", "network": False},
        "mcp": {"workspaceServers": "deny"},
    }
    assert json.loads(fifth) == {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}
    assert json.loads(sixth) == {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}


def test_always_allow_saves_the_rule_and_the_next_run_asks_nothing(tmp_path, workspace, model):
    """"Always allow" chosen in the minibuffer (Decision 27): the prompt names the rule, the
    command runs, the rule lands in the user settings file beside what it held, and the next
    run's same command runs without a question."""
    user_file = tmp_path / "user-settings.json"
    user_file.write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}}), encoding="utf-8")
    touch = {"tool_calls": [{"name": "run_command", "arguments": {"command": "touch one"}}],
             "usage": {"prompt_tokens": 1000, "completion_tokens": 10}}
    budget = {"pricing": {"m": {"inputPerMTok": 2.5, "outputPerMTok": 10}}, "budget": {"maxCostUsd": 1}}
    model.add("Touch it", [touch, {"text": "Touched."}, touch, {"text": "Touched again."}])  # one session
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer "Always allow")
        (agent-lsp-run "Touch it")
        (t-wait 20 #'t-stop-event "the first stop")
        (t-set :saved (with-temp-buffer
                        (insert-file-contents (getenv "AGENT_LSP_SETTINGS"))
                        (buffer-string)))
        (delete-file (expand-file-name "one" (project-root (project-current))))
        (agent-lsp-run "Again touch it")
        (t-wait 20 (lambda () (= 2 (length (t-events "stop")))) "the second stop")
    """, extra_env={"AGENT_LSP_SETTINGS": str(user_file)}, settings=budget)
    assert not res.errors, res.explain()
    assert [s["report"]["stopReason"] for s in res.events("stop")] == ["done", "done"], res.explain()
    [ask] = [p for p in res.data["prompts"] if p["prompt"].startswith("[agent-lsp]")]  # one question
    assert ask["items"] == ["Allow", "Allow for session", "Always allow", "Deny"], ask
    assert "touch one" in ask["prompt"], ask
    assert "Always allow saves the rule Bash(touch one) in your user settings file" in ask["prompt"], ask
    assert [a["answer"] for a in res.data["approvalAnswers"]] == ["Always allow"]
    # the mode line showed the cost beside the run's budget (Decision 36)
    assert any(m.startswith("agent: ctx 1k/128k · $0.003 of $1.00 · ") for m in res.data["modeLines"]), \
        res.data["modeLines"]
    assert json.loads(res.values["saved"]) == {"permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(touch one)"]}}
    assert (workspace / "one").exists()  # the second run touched it again, unasked
    assert [e["state"] for e in res.events("approval")] == ["pending", "allowed"], res.explain()
    assert res.data["stream"].count("[result] run_command ok") == 2, res.data["stream"]
    # a new Emacs, a new server process: the saved rule still answers, nobody is asked
    (workspace / "one").unlink()
    model.add("Touch once more", [touch, {"text": "Touched once more."}])
    later = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer 'hang)
        (agent-lsp-run "Touch once more")
        (t-wait 20 #'t-stop-event "the stop event")
    """, extra_env={"AGENT_LSP_SETTINGS": str(user_file)})
    assert not later.errors, later.explain()
    assert later.values["server-pid"] != res.values["server-pid"]
    assert later.stop()["report"]["stopReason"] == "done", later.explain()
    assert later.data["prompts"] == [] and later.events("approval") == [], later.explain()
    assert (workspace / "one").exists()


def test_unknown_stream_kinds_and_report_fields_are_ignored(tmp_path):
    """Decision 90: a newer server's kinds and report fields: no error, no garbled line; a
    `steer` reads as the user's words; the run's end shows as usual."""
    script = r"""
    (require 'agent-lsp)
    (let ((server (make-instance 'agent-lsp-server :process (make-pipe-process :name "x"))))
      (dolist (ev '((:runId "r1" :seq 0 :kind "status" :text "turn 1" :turn 1)
                    (:runId "r1" :seq 1 :kind "steer" :text "use tabs" :agentId "main")
                    (:runId "r1" :seq 2 :kind "someFutureKind" :text "gibberish"
                     :futureField (:a 1))
                    (:runId "r1" :seq 3 :kind "text" :text "Done.")
                    (:runId "r1" :seq 4 :kind "stop" :text ""
                     :report (:stopReason "done" :summary "All good" :sessionId "s1"
                              :futureField (:nested ["x"]) :futureCount 3))))
        (apply #'eglot-handle-notification server 'agentLsp/stream ev))
      (princ (with-current-buffer (agent-lsp-stream-buffer) (buffer-string)))
      (princ "\n--MESSAGES--\n")
      (princ (with-current-buffer "*Messages*" (buffer-string))))
    """
    proc = subprocess.run(
        [EMACS, "-q", "--batch", "-L", str(CLIENT_DIR), "--eval", f"(progn {script})"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    shown, messages = proc.stdout.split("\n--MESSAGES--\n")
    assert "» use tabs" in shown, shown
    assert "someFutureKind" not in shown and "gibberish" not in shown, shown
    assert "Done." in shown and "[stop: done] All good" in shown, shown
    assert "agent-lsp: run r1 done: All good" in messages, messages
    assert "rror" not in messages + proc.stderr, messages + proc.stderr


HUNKS_BEFORE = "".join(f"line {i}\n" for i in range(1, 61))
HUNKS_AFTER = (HUNKS_BEFORE.replace("line 5\n", "LINE FIVE\n").replace("line 40\n", "forty\nforty-one\n")
               .replace("line 55\n", ""))


def test_a_hunk_killed_in_the_diff_buffer_is_rejected(tmp_path, workspace, model):
    """Per-hunk review (Decision 58): `diff-hunk-kill` on the second hunk of the approval's
    diff-mode buffer, then Allow: the answer keeps hunks 0 and 2, the file gets those only and
    the model hears that hunk 2 was rejected."""
    (workspace / "notes.txt").write_text(HUNKS_BEFORE)
    model.add("Tidy the notes", [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": HUNKS_AFTER}}]},
        {"text": "Tidied."},
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (setq t-approval-answer
              (lambda (_prompt _items)
                (with-current-buffer "*agent-lsp diff*"
                  (t-set :header header-line-format)
                  (goto-char (point-min))
                  (re-search-forward "^@@" nil t 2)
                  (diff-hunk-kill)
                  (t-set :hunks-left (how-many "^@@" (point-min) (point-max))))
                "Allow"))
        (agent-lsp-run "Tidy the notes")
        (t-wait 20 #'t-stop-event "the stop event")
    """)
    assert not res.errors, res.explain()
    assert res.stop()["report"]["stopReason"] == "done", res.explain()
    assert res.values["hunks-left"] == 2 and "kills a hunk" in res.values["header"], res.values
    text = (workspace / "notes.txt").read_text()
    assert "LINE FIVE\n" in text and "line 55\n" not in text and "line 40\n" in text and "forty" not in text
    assert any("applied hunks 1 and 3 of 3; the user rejected hunk 2 of 3 (lines 37-43)" in m
               for m in tool_messages(model)), tool_messages(model)


def test_processes_lists_a_running_background_process_and_stops_the_one_chosen(tmp_path, workspace, model):
    """Issue 35: `agent-lsp-processes` lists the running background processes (from the
    `process` events); the one chosen is stopped through `agentLsp.stopProcess`."""
    (workspace / "sleeper.py").write_text(
        "import os, time\nopen('sleeper.pid', 'w').write(str(os.getpid()))\nprint('zzz', flush=True)\n"
        "while True:\n    time.sleep(1)\n")
    model.add("Serve it", [
        {"text": "", "tool_calls": [{"id": "c1", "name": "run_command",
                                     "arguments": {"command": f"{sys.executable} -u sleeper.py", "background": True}}]},
        {"text": "never", "ttft": 30},
    ])
    res = run_emacs(tmp_path, workspace, model, r"""
        (set-buffer t-buffer)
        (t-set :none (condition-case err (progn (agent-lsp-processes) nil)
                       (user-error (error-message-string err))))
        (agent-lsp-run "Serve it in the background")
        (t-wait 30 (lambda () (t-events "toolResult")) "the answer of run_command")
        (t-set :running-before (length (agent-lsp-running-processes)))
        (setq t-completing-read-answer (lambda (_prompt items) (car items)))
        (call-interactively #'agent-lsp-processes)
        (t-wait 10 (lambda () (seq-find (lambda (e) (equal (plist-get e :state) "stopped"))
                                        (t-events "process")))
                "the stopped event")
        (t-set :running-after (length (agent-lsp-running-processes)))
        (call-interactively #'agent-lsp-cancel)
        (t-wait 8 #'t-stop-event "the stop")
    """, approval={"default": "allow"})
    assert not res.errors, res.explain()
    assert res.values["none"] == "agent-lsp: no background process is running", res.values
    assert res.values["running-before"] == 1 and res.values["running-after"] == 0, res.values
    picker = [p for p in res.data["prompts"] if "Stop which background process?" in p["prompt"]]
    assert len(picker) == 1 and len(picker[0]["items"]) == 1, res.data["prompts"]
    assert picker[0]["items"][0].startswith(f"p1  {sys.executable} -u sleeper.py  (run "), picker
    run_id = res.stop()["runId"]
    stops = [c["arguments"] for c in res.data["commands"] if c["command"] == "agentLsp.stopProcess"]
    assert stops == [[{"runId": run_id, "processId": "p1"}]], res.data["commands"]
    assert "[process] background process p1 stopped" in res.data["stream"], res.data["stream"]
    pid = int((workspace / "sleeper.pid").read_text())
    assert process_gone(pid, within=5)
    assert res.stop()["report"]["processes"][0]["state"] == "stopped"
