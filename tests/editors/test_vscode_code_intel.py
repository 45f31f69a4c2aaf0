"""CONTRACT "Code intelligence", Source 1 in a real VS Code (code-server): the extension answers
`agentLsp/codeIntel` from VS Code's built-in TypeScript language features (no extension to
install). agent-lsp's real server with a probe (tests/e2e/code_intel_probe.py) asks its editor
source once shapes.ts is open, as the code-intel tools do; each answer is the LSP JSON the
extension converted from VS Code's objects."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import test_vscode as vs  # noqa: E402
from test_vscode import tools  # noqa: E402, F401 - the setup fixture

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


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory, tools: dict[str, str]) -> dict[str, Any]:  # noqa: F811
    tmp = tmp_path_factory.mktemp("vscode-ci")
    out = tmp / "answers.json"
    plan_file = tmp / "plan.json"
    plan_file.write_text(json.dumps(plan()))
    wrapper = tmp / "agent-lsp"
    # code-server hands its extensions a clean environment: the probe's settings go here
    wrapper.write_text(f"#!/bin/sh\nexport AGENT_LSP_PROBE_PLAN={shlex.quote(str(plan_file))}\n"
                       f"export AGENT_LSP_PROBE_OUT={shlex.quote(str(out))}\n"
                       f"exec {shlex.quote(sys.executable)} {shlex.quote(str(PROBE))}\n")
    wrapper.chmod(0o755)
    marker = f"agent-lsp-vscode-ci-{os.getpid()}-{tmp.name}"
    env = {**os.environ, **tools, "AGENT_LSP_E2E_MARKER": marker, "AGENT_LSP_SERVER": str(wrapper),
           "AGENT_LSP_MODEL_URL": "http://127.0.0.1:9/v1", "AGENT_LSP_SCENARIOS": "codeIntelProbe",
           "AGENT_LSP_SCREENSHOT_DIR": str(tmp / "screenshots"), "AGENT_LSP_TASKS": "{}",
           "AGENT_LSP_PROBE_OUT": str(out)}
    try:
        proc = subprocess.run([tools["AGENT_LSP_NODE"], str(vs.HERE / "run-test.mjs")],
                              capture_output=True, text=True, timeout=900, env=env, cwd=vs.REPO)
    finally:
        leftovers = vs.kill_marked(marker)
    (tmp / "driver.log").write_text(proc.stderr)
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"run-test.mjs printed no JSON (exit {proc.returncode}):\n{proc.stderr[-6000:]}")
    scenario = result["scenarios"].get("codeIntelProbe")
    assert scenario is not None and "error" not in scenario, \
        f"{scenario}\n{result.get('error')}\nserver log: {result.get('serverLog', '')[-6000:]}\n{proc.stderr[-3000:]}"
    assert leftovers == [] and result["orphans"] == [], (leftovers, result["orphans"])
    return {**scenario["answers"], "serverLog": result.get("serverLog", "")}


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


TASK = "Rename greet of Greeter to salute"


def test_vscode_agent_finds_references_and_renames_through_typescript(tmp_path_factory, tools):  # noqa: F811
    """Agent: Run Task…: the model's find_references is answered by VS Code's TypeScript
    features (Greeter.greet's uses, not Other.greet), its rename_symbol is one approval with
    both files in one multi-diff editor (screenshot rename-approval.png) and changes both."""
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    tmp = tmp_path_factory.mktemp("vscode-ci-tools")
    wrapper = tmp / "agent-lsp"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m agent_lsp "$@"\n')
    wrapper.chmod(0o755)
    with ScriptedModelServer() as model:
        model.add(TASK, [
            {"tool_calls": [{"id": "refs", "name": "find_references",
                             "arguments": {"path": "shapes.ts", "line": 2, "symbol": "greet"}}]},
            {"tool_calls": [{"id": "ren", "name": "rename_symbol",
                             "arguments": {"path": "shapes.ts", "line": 2, "symbol": "greet", "newName": "salute"}}]},
            {"text": "Renamed."},
        ])
        marker = f"agent-lsp-vscode-ci-tools-{os.getpid()}-{tmp.name}"
        env = {**os.environ, **tools, "AGENT_LSP_E2E_MARKER": marker, "AGENT_LSP_SERVER": str(wrapper),
               "AGENT_LSP_MODEL_URL": model.base_url, "AGENT_LSP_SCENARIOS": "codeIntelTools",
               "AGENT_LSP_SCREENSHOT_DIR": str(tmp / "screenshots"),
               "AGENT_LSP_TASKS": json.dumps({"codeIntel": TASK, "configuredModel": "scripted"})}
        try:
            proc = subprocess.run([tools["AGENT_LSP_NODE"], str(vs.HERE / "run-test.mjs")],
                                  capture_output=True, text=True, timeout=900, env=env, cwd=vs.REPO)
        finally:
            leftovers = vs.kill_marked(marker)
        requests = model.requests_for(TASK)
    (tmp / "driver.log").write_text(proc.stderr)
    result = json.loads(proc.stdout)
    scenario = result["scenarios"].get("codeIntelTools")
    assert scenario is not None and "error" not in scenario, \
        f"{scenario}\n{result.get('error')}\nserver log: {result.get('serverLog', '')[-6000:]}"
    assert leftovers == [] and result["orphans"] == []
    refs = next(m["content"] for m in requests[1]["messages"] if m.get("tool_call_id") == "refs")
    assert "main.ts:4:15" in refs and "shapes.ts:14:12" in refs, refs
    assert "greet(): string" in scenario["shapes"] and "salute(name: string)" in scenario["shapes"]
    assert "g.salute('a')" in scenario["main"] and "'greet'" in scenario["main"]
    # the approval showed both files in one multi-diff editor, closed after the answer
    assert scenario["diffTabs"] == ["Agent rename_symbol (current ↔ proposed) (2 files)"], scenario["diffTabs"]
    assert "main.ts" in scenario["diffPaneText"] and "salute" in scenario["diffPaneText"], scenario["diffPaneText"]
    assert scenario["diffTabsAfter"] == []
    if os.environ.get("AGENT_LSP_UPDATE_SCREENSHOT") == "1":
        shot = tmp / "screenshots" / "rename-approval.png"
        if shot.is_file():
            shutil.copy(shot, vs.EXTENSION / "rename-approval.png")


PREVIEW_TASK = "Rename greet of Greeter to salute, in the preview"


def test_vscode_rename_opens_in_the_refactor_preview(tmp_path_factory, tools):  # noqa: F811
    """CONTRACT "Edit review": with agentLsp.editPreview on, rename_symbol is ONE annotated
    applyEdit that VS Code shows in its Refactor Preview with both files (screenshot
    rename-preview.png), no approval toast, each renamed place ticked (Decision 80); Apply
    alone, and both files change."""
    from agent_lsp.testing.scripted_model import ScriptedModelServer

    tmp = tmp_path_factory.mktemp("vscode-ci-preview")
    wrapper = tmp / "agent-lsp"
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m agent_lsp "$@"\n')
    wrapper.chmod(0o755)
    with ScriptedModelServer() as model:
        model.add(PREVIEW_TASK, [
            {"tool_calls": [{"id": "ren", "name": "rename_symbol",
                             "arguments": {"path": "shapes.ts", "line": 2, "symbol": "greet", "newName": "salute"}}]},
            {"text": "Renamed."},
        ])
        marker = f"agent-lsp-vscode-ci-preview-{os.getpid()}-{tmp.name}"
        env = {**os.environ, **tools, "AGENT_LSP_E2E_MARKER": marker, "AGENT_LSP_SERVER": str(wrapper),
               "AGENT_LSP_MODEL_URL": model.base_url, "AGENT_LSP_SCENARIOS": "codeIntelRenamePreview",
               "AGENT_LSP_SCREENSHOT_DIR": str(tmp / "screenshots"),
               "AGENT_LSP_TASKS": json.dumps({"codeIntelPreview": PREVIEW_TASK, "configuredModel": "scripted"})}
        try:
            proc = subprocess.run([tools["AGENT_LSP_NODE"], str(vs.HERE / "run-test.mjs")],
                                  capture_output=True, text=True, timeout=900, env=env, cwd=vs.REPO)
        finally:
            leftovers = vs.kill_marked(marker)
        requests = model.requests_for(PREVIEW_TASK)
    (tmp / "driver.log").write_text(proc.stderr)
    result = json.loads(proc.stdout)
    scenario = result["scenarios"].get("codeIntelRenamePreview")
    assert scenario is not None and "error" not in scenario, \
        f"{scenario}\n{result.get('error')}\nserver log: {result.get('serverLog', '')[-6000:]}"
    assert leftovers == [] and result["orphans"] == []
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
    if os.environ.get("AGENT_LSP_UPDATE_SCREENSHOT") == "1":
        shot = tmp / "screenshots" / "rename-preview.png"
        if shot.is_file():
            shutil.copy(shot, vs.EXTENSION / "rename-preview.png")
