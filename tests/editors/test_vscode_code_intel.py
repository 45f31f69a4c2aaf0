"""CONTRACT "Code intelligence" and "The debugger (turn 4)", Source 1 in a real VS Code
(code-server): the extension answers `agentLsp/codeIntel` from VS Code's built-in TypeScript
language features (no extension to install), and runs the agent's debug_start in VS Code's own
JavaScript debugger. agent-lsp's real server with a probe (tests/e2e/code_intel_probe.py) asks
its editor source once shapes.ts is open, as the code-intel tools do; each answer is the LSP
JSON the extension converted from VS Code's objects. Then, in the same window, agent-lsp's real
server takes over (agentLsp.serverPath) for the agent's runs: one code-server for the file."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import beside

sys.path.insert(0, str(Path(__file__).parent))
import test_vscode as vs  # noqa: E402

pytestmark = vs.pytestmark
PROBE = vs.REPO / "tests" / "e2e" / "code_intel_probe.py"

GREET = {"line": 1, "character": 2}  # shapes.ts: `  greet(name: string): string {`


def plan() -> list[dict[str, Any]]:
    """The requests, `{ws}`/`{wsUri}` standing for the workspace run-test.mjs makes."""
    shapes, main = "{ws}/shapes.ts", "{ws}/main.ts"
    doc = {"uri": "{wsUri}/shapes.ts"}
    at = {"textDocument": doc, "position": GREET}
    return [
        # tsserver loads the project first: null (or the open file's only) until then
        {"name": "references", "method": "textDocument/references", "path": shapes, "retry": 90, "until": "main.ts",
         "params": {**at, "context": {"includeDeclaration": False}}},
        {"name": "definition", "method": "textDocument/definition", "path": main,
         "params": {"textDocument": {"uri": "{wsUri}/main.ts"}, "position": {"line": 3, "character": 14}}},
        {"name": "hover", "method": "textDocument/hover", "path": shapes, "params": at},
        {"name": "symbols", "method": "textDocument/documentSymbol", "path": shapes, "params": {"textDocument": doc}},
        {"name": "workspaceSymbols", "method": "workspace/symbol", "path": shapes, "params": {"query": "Greeter"},
         "retry": 20},
        {"name": "prepareCalls", "method": "textDocument/prepareCallHierarchy", "path": shapes, "params": at},
        {"name": "incoming", "method": "callHierarchy/incomingCalls", "path": shapes, "itemFrom": "prepareCalls"},
        {"name": "prepareRename", "method": "textDocument/prepareRename", "path": shapes, "params": at},
        {"name": "rename", "method": "textDocument/rename", "path": shapes, "params": {**at, "newName": "salute"}},
        # inside a comment: TypeScript cannot rename there
        {"name": "renameKeyword", "method": "textDocument/rename", "path": main,
         "params": {"textDocument": {"uri": "{wsUri}/main.ts"}, "position": {"line": 3, "character": 64},
                    "newName": "x"}},
    ]


TASK = "Rename greet of Greeter to salute"
PREVIEW_TASK = "Rename greet of Greeter to salute, in the preview"
DEBUG_TASK = "Find out why average of avg.js is wrong"
# One window for every test here: the probe's server first, then agent-lsp's real server
# (agentLsp.serverPath changed, as a user would), the debugger, and the Refactor Preview last
# (it turns agentLsp.editPreview on and renames the files back from their first state).
SCENARIOS = "codeIntelProbe,codeIntelTools,debugInVsCode,codeIntelRenamePreview"


def script(model: Any) -> None:
    model.add(TASK, [
        {"tool_calls": [{"id": "refs", "name": "find_references",
                         "arguments": {"path": "shapes.ts", "line": 2, "symbol": "greet"}}]},
        {"tool_calls": [{"id": "ren", "name": "rename_symbol",
                         "arguments": {"path": "shapes.ts", "line": 2, "symbol": "greet", "newName": "salute"}}]},
        {"text": "Renamed."},
    ])
    model.add(PREVIEW_TASK, [
        {"tool_calls": [{"id": "ren", "name": "rename_symbol",
                         "arguments": {"path": "shapes.ts", "line": 2, "symbol": "greet", "newName": "salute"}}]},
        {"text": "Renamed."},
    ])
    model.add(DEBUG_TASK, [
        {"tool_calls": [{"id": "start", "name": "debug_start", "arguments": {
            "program": "avg.js", "breakpoints": [{"path": "avg.js", "line": 7}]}}]},
        {"tool_calls": [{"id": "eval", "name": "debug_eval",
                         "arguments": {"expression": "total * 2 + count"}}]},
        {"tool_calls": [{"id": "next", "name": "debug_step", "arguments": {"action": "next"}}]},
        {"tool_calls": [{"id": "cont", "name": "debug_step", "arguments": {"action": "continue"}}]},
        {"tool_calls": [{"id": "crash", "name": "debug_start", "arguments": {"program": "crash.js"}}]},
        {"tool_calls": [{"id": "py", "name": "debug_start", "arguments": {"program": "calc.py"}}]},
        {"tool_calls": [{"id": "spin", "name": "debug_start", "arguments": {"program": "spin.js", "timeout": 2}}]},
        {"tool_calls": [{"id": "again", "name": "debug_start", "arguments": {
            "program": "avg.js", "breakpoints": [{"path": "avg.js", "line": 7}]}}]},
        {"text": "count is one short: values.length - 1."},  # the run ends while paused
    ])


def executable(path: Path, command: str, env: dict[str, str] | None = None) -> Path:
    """A shell script running `command` with this checkout's agent_lsp first on the path
    (code-server hands its extensions a clean environment: no PYTHONPATH, none of our settings)."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    path.write_text(f"#!/bin/sh\nexport PYTHONPATH={shlex.quote(str(vs.REPO))}\n{exports}exec {command}\n")
    path.chmod(0o755)
    return path


def play(tmp: Path, vsix: Path) -> dict[str, Any]:
    """The code-intelligence probe, the agent's rename and the debugger in one window
    (tests/beside.py may play this beside the tests)."""
    out = tmp / "answers.json"
    plan_file = tmp / "plan.json"
    plan_file.write_text(json.dumps(plan()))
    python = shlex.quote(sys.executable)
    probe_server = executable(tmp / "agent-lsp-probe", f"{python} {shlex.quote(str(PROBE))}",
                              {"AGENT_LSP_PROBE_PLAN": str(plan_file), "AGENT_LSP_PROBE_OUT": str(out)})
    agent_server = executable(tmp / "agent-lsp", f'{python} -m agent_lsp "$@"')
    tasks = {"codeIntel": TASK, "codeIntelPreview": PREVIEW_TASK, "debug": DEBUG_TASK,
             "configuredModel": "scripted", "agentServer": str(agent_server)}
    env = {"AGENT_LSP_SERVER": str(probe_server), "AGENT_LSP_SCENARIOS": SCENARIOS,
           "AGENT_LSP_TASKS": json.dumps(tasks), "AGENT_LSP_PROBE_OUT": str(out)}
    shots = {"rename-approval.png": "rename-approval.png", "rename-preview.png": "rename-preview.png",
             "debug-paused.png": "debug.png"}
    return vs.play_driver(tmp, vsix, script, env, [TASK, PREVIEW_TASK, DEBUG_TASK], 1200, shots)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> vs.Session:
    """The session played beside the tests from the run's start (tests/beside.py), or here."""
    found = (beside.result("vscode-code-intel", 1200)
             or play(tmp_path_factory.mktemp("vscode-ci"), vs.vsix_folder(tmp_path_factory)))
    return vs.Session.of(found)


@pytest.fixture(scope="module")
def probe(session: vs.Session) -> dict[str, Any]:
    scenario = session.scenario("codeIntelProbe")
    assert session.result["leftovers"] == [] and session.result["orphans"] == [], \
        (session.result["leftovers"], session.result["orphans"])
    return {**scenario["answers"], "serverLog": scenario["serverLog"]}


def name(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def test_vscode_code_intel_references_and_rename(probe: dict[str, Any]):
    """find_references and rename_symbol's answers: Greeter.greet's uses only (not Other.greet,
    the string or the comment), without the declaration; the rename's edit over both files as
    `changes`; a comment cannot be renamed (the provider's refusal is the error)."""
    refs = probe["references"]["result"]
    found = sorted((name(r["uri"]), r["range"]["start"]["line"], r["range"]["start"]["character"]) for r in refs)
    assert found == [("main.ts", 3, 14), ("shapes.ts", 13, 11)], probe["references"]
    changes = probe["rename"]["result"]["changes"]
    assert {name(u) for u in changes} == {"shapes.ts", "main.ts"}, changes
    assert all(e["newText"] == "salute" for edits in changes.values() for e in edits)
    assert sum(len(e) for e in changes.values()) == 3
    assert probe["prepareRename"]["result"]["placeholder"] == "greet"
    assert "error" in probe["renameKeyword"], probe["renameKeyword"]
    assert probe["renameKeyword"]["error"].startswith("the editor could not answer textDocument/rename: ")


def test_vscode_code_intel_navigation(probe: dict[str, Any]):
    """Definition (Location or LocationLink), hover (markdown), the outline (DocumentSymbol,
    LSP's 1-based kinds), workspace symbols and the incoming calls of greet."""
    definition = probe["definition"]["result"][0]
    assert name(definition.get("targetUri") or definition["uri"]) == "shapes.ts", definition
    assert (definition.get("targetSelectionRange") or definition["range"])["start"] == GREET
    assert "greet(name: string): string" in probe["hover"]["result"]["contents"]["value"], probe["hover"]
    symbols = {s["name"]: s for s in probe["symbols"]["result"]}
    assert symbols["Greeter"]["kind"] == 5 and symbols["welcome"]["kind"] == 12, symbols  # Class, Function
    assert [c["name"] for c in symbols["Greeter"]["children"]] == ["greet"]
    assert any(s["name"] == "Greeter" and name(s["location"]["uri"]) == "shapes.ts"
               for s in probe["workspaceSymbols"]["result"]), probe["workspaceSymbols"]
    callers = {c["from"]["name"] for c in probe["incoming"]["result"]}
    assert "welcome" in callers, probe["incoming"]


def test_vscode_health_check_lists_the_code_intel_source(probe: dict[str, Any]):
    assert re.search(r"health check: code intelligence: codeIntel is advertised; the agent asks VS Code's "
                     r"language features \(active now: [^)]*vscode\.typescript-language-features", probe["serverLog"]), \
        probe["serverLog"][-3000:]


def test_vscode_agent_finds_references_and_renames_through_typescript(session: vs.Session):
    """Agent: Run Task…: the model's find_references is answered by VS Code's TypeScript
    features (Greeter.greet's uses, not Other.greet), its rename_symbol is one approval with
    both files in one multi-diff editor (screenshot rename-approval.png) and changes both."""
    scenario = session.scenario("codeIntelTools")
    assert session.result["leftovers"] == [] and session.result["orphans"] == []
    requests = session.requests[TASK]
    refs = next(m["content"] for m in requests[1]["messages"] if m.get("tool_call_id") == "refs")
    assert "main.ts:4:15" in refs and "shapes.ts:14:12" in refs, refs
    assert "greet(): string" in scenario["shapes"] and "salute(name: string)" in scenario["shapes"]
    assert "g.salute('a')" in scenario["main"] and "'greet'" in scenario["main"]
    # the approval showed both files in one multi-diff editor, closed after the answer
    assert scenario["diffTabs"] == ["Agent rename_symbol (current ↔ proposed) (2 files)"], scenario["diffTabs"]
    assert "main.ts" in scenario["diffPaneText"] and "salute" in scenario["diffPaneText"], scenario["diffPaneText"]
    assert scenario["diffTabsAfter"] == []


def test_vscode_rename_opens_in_the_refactor_preview(session: vs.Session):
    """CONTRACT "Edit review": with agentLsp.editPreview on, rename_symbol is ONE annotated
    applyEdit that VS Code shows in its Refactor Preview with both files (screenshot
    rename-preview.png), no approval toast, each renamed place ticked (Decision 80); Apply
    alone, and both files change."""
    scenario = session.scenario("codeIntelRenamePreview")
    assert session.result["leftovers"] == [] and session.result["orphans"] == []
    requests = session.requests[PREVIEW_TASK]
    # Decision 80: each renamed place (its own row) and both files open ticked; the one row
    # left unticked is the confirming no-op entry, so Apply alone renames everywhere
    rows = scenario["rowsBefore"]
    places = [row for row in rows if "replacing greet with salute" in (row["aria"] or "")]
    assert len(places) == 3 and all(row["checked"] for row in places), rows
    assert [row["checked"] for row in rows if row["text"] in ("main.ts", "shapes.ts")] == [True, True], rows
    assert [row["aria"] for row in rows if not row["checked"]] == [None], rows
    assert "main.ts" in scenario["panelText"] and "shapes.ts" in scenario["panelText"], scenario["panelText"]
    assert "('you');" in scenario["panelText"], "each renamed place is its own line in the preview"
    assert not [t for t in scenario["toasts"] if "rename_symbol" in t], scenario["toasts"]
    assert "greet(): string" in scenario["shapes"] and "salute(name: string)" in scenario["shapes"]
    assert "g.salute('a')" in scenario["main"] and "'greet'" in scenario["main"]
    ren = next(m["content"] for m in requests[-1]["messages"] if m.get("tool_call_id") == "ren")
    assert ren.startswith("applied: rename `greet` to `salute` in 2 files"), ren


def tool_result(requests: list[dict[str, Any]], call_id: str) -> str:
    for request in requests:
        for message in request["messages"]:
            if message.get("tool_call_id") == call_id:
                return str(message["content"])
    raise AssertionError(f"no result for {call_id}")


def test_vscode_debugs_with_its_own_debugger_and_the_agent_reads_the_locals(session: vs.Session):
    """debug_start on avg.js with a breakpoint on `return total / count`: VS Code's CALL STACK
    shows the session paused on the breakpoint (while the debug_eval approval waits; screenshot
    debug.png), the
    model's next request holds `count = 2` and `total = 18` (values only the debugger knows),
    debug_eval, next and a continue to the end work; an uncaught exception stops (crash.js); a
    Python program without the Python Debugger extension is a clear tool error; an endless one
    is paused at its timeout; a
    last session still paused when the run
    ends is ended with it (no debug session left in VS Code)."""
    scenario = session.scenario("debugInVsCode")
    requests = session.requests[DEBUG_TASK]
    assert session.result["leftovers"] == [] and session.result["orphans"] == []
    # the approval said where it runs
    assert "runs in the editor's debugger" in scenario["startApproval"], scenario["startApproval"]
    assert "debug: $ avg.js" in scenario["startApproval"], scenario["startApproval"]  # not `python3 avg.js`
    # (a) VS Code's own debug view showed the agent's session paused at the breakpoint
    assert re.search(r"Paused on breakpoint", scenario["callStack"], re.I), scenario["callStack"]
    assert "average" in scenario["callStack"] and "avg.js" in scenario["callStack"], scenario["callStack"]
    # (b) the agent got the stop with the locals only the debugger knows
    start = tool_result(requests, "start")
    assert start.startswith("state: stopped (breakpoint)"), start
    assert "location: avg.js:7" in start, start
    assert re.search(r"^count \(.*\) = 2$", start, re.M) and re.search(r"^total \(.*\) = 18$", start, re.M), start
    assert re.search(r"^avg\.js:7 \S*average$", start, re.M), start
    assert tool_result(requests, "eval").endswith("= 38"), tool_result(requests, "eval")
    cont = tool_result(requests, "cont")
    nxt = tool_result(requests, "next")
    # js-debug stops at the end of the return statement and shows what it returns
    assert nxt.startswith("state: stopped (step)\nlocation: avg.js:7"), nxt
    assert re.search(r"^Return value \(.*\) = 9$", nxt, re.M), nxt
    # js-debug sends no DAP `exited` event: VS Code's session ends without an exit code
    assert cont.startswith("state: exited (unknown)") and "average 9" in cont, cont
    # an uncaught exception stops there, though the user's Breakpoints view has it unticked
    crash = tool_result(requests, "crash")
    assert crash.startswith("state: stopped (exception)\nlocation: crash.js:3"), crash
    assert re.search(r"^xs \(.*\) = .*\[1, 2, 3\]$", crash, re.M), crash
    # no Python debugger in this VS Code: a clear tool error, and the run goes on
    py = tool_result(requests, "py")
    assert "VS Code has no Python debugger: install the Python Debugger extension" in py, py
    # a program that never stops is paused at the timeout, where it is (Decision 88)
    spin = tool_result(requests, "spin")
    assert re.match(r"state: stopped \(pause\)\nlocation: spin\.js:[1-4]\n", spin), spin
    again = tool_result(requests, "again")
    assert again.startswith("state: stopped (breakpoint)\nlocation: avg.js:7"), again
    # the session is the agent's, by name, in VS Code's debug view
    assert "Agent: debug avg.js" in scenario["callStack"], scenario["callStack"]
    # the run ended while the second session was paused: it ended with the run
    assert scenario["toolbarAfter"] is False and scenario["debuggeesAfter"] == []
