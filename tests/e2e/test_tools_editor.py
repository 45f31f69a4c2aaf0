"""Tools that scale and see what the editor sees (issue 13), through the real server: ripgrep
search over a big tree, ignore rules as git reads them, a catastrophic regex, unsaved buffers,
editor diagnostics (the tool and after an edit), multi-root workspaces, and `remember`."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import attrs
import pytest

from tests.e2e.harness import capabilities, start_editor, tool_messages

ALLOW = {"approval": {"default": "allow"}}


def calls(*items: dict) -> dict:
    return {"tool_calls": [{"id": f"c{i}", **item} for i, item in enumerate(items)]}


async def stop(editor, prompt: str, timeout: float = 30, **extra) -> dict:
    started = await editor.run(prompt, **extra)
    return await editor.wait_stop(started["runId"], timeout)


def rg_children(parent: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "rg":
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def big_tree():
    """30,000 files (on tmpfs when there is one: ext4 /tmp makes this take seconds)."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    root = Path(tempfile.mkdtemp(prefix="agent-lsp-big-", dir=base))
    for d in range(30):
        folder = root / f"d{d:02d}"
        folder.mkdir()
        for f in range(1000):
            (folder / f"f{f:04d}.txt").write_text("nothing here\n")
    (root / "d29" / "f0999.txt").write_text("nothing here\nTHE-ONLY-NEEDLE is here\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.timeout(120)
async def test_search_finds_the_only_match_in_the_last_of_30000_files(model, big_tree):
    model.add("needle", [calls({"name": "search", "arguments": {"pattern": "THE-ONLY-NEEDLE"}}), {"text": "found"}])
    editor = await start_editor(big_tree, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    try:
        await stop(editor, "find the needle", 60)
        assert tool_messages(model.requests[-1])["c0"] == "d29/f0999.txt:2: THE-ONLY-NEEDLE is here"
    finally:
        await editor.quit()


async def test_nested_ignores_with_negation_as_git_reads_them(open_editor, model, workspace):
    (workspace / ".gitignore").write_text("*.log\nbuild/\n")
    (workspace / "sub").mkdir()
    (workspace / "sub/.gitignore").write_text("!keep.log\n")
    (workspace / "sub/keep.log").write_text("MARK kept\n")
    (workspace / "sub/drop.log").write_text("MARK dropped\n")
    (workspace / "build").mkdir()
    (workspace / "build/out.txt").write_text("MARK built\n")
    (workspace / ".hidden.txt").write_text("MARK hidden\n")
    model.add("ignores", [calls({"name": "search", "arguments": {"pattern": "MARK"}}, {"name": "list_files", "arguments": {}}),
                          {"text": "ok"}])
    editor = await open_editor()
    await stop(editor, "ignores")
    results = tool_messages(model.requests[-1])
    assert results["c0"].splitlines() == [".hidden.txt:1: MARK hidden", "sub/keep.log:1: MARK kept"]
    listed = results["c1"].splitlines()
    assert "sub/keep.log" in listed and ".hidden.txt" in listed and ".gitignore" in listed
    assert "sub/drop.log" not in listed and "build/out.txt" not in listed


async def test_a_catastrophic_regex_is_answered_and_leaves_no_busy_thread(open_editor, model, workspace):
    (workspace / "aaa.txt").write_text("a" * 50_000 + "!\n")
    model.add("regex", [calls({"name": "search", "arguments": {"pattern": "(a+)+$"}}), {"text": "ok"}])
    editor = await open_editor()
    report = await stop(editor, "regex", 30)
    assert report["stopReason"] == "done"
    assert tool_messages(model.requests[-1])["c0"]  # an answer (matches or none), within the run
    used = cpu_seconds(editor.process.pid)
    await asyncio.sleep(1.0)
    assert cpu_seconds(editor.process.pid) - used < 0.3, "no thread left spinning on a regex after the run"
    assert await editor.execute("agentLsp.cancel", {"runId": "r-none"}) is False, "the server still answers"


async def test_unsaved_buffer_text_is_searched_as_the_editor_holds_it(open_editor, model, workspace):
    model.add("buffer", [calls({"name": "search", "arguments": {"pattern": "UNSAVED-WORD|return a - b"}}), {"text": "ok"}])
    editor = await open_editor()
    editor.open("calc.py")
    editor.type_into("calc.py", "def add(a, b):\n    return UNSAVED-WORD\n")
    await stop(editor, "buffer search")
    assert tool_messages(model.requests[-1])["c0"] == "calc.py:2: return UNSAVED-WORD"


async def test_a_cancelled_search_leaves_no_rg(open_editor, model, big_tree):
    model.add("slow", [calls({"name": "search", "arguments": {"pattern": "(x|y|z)+[a-z]{3,}\\d+\\w*q"}}), {"text": "never", "ttft": 30}])
    editor = await start_editor(big_tree, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url})
    try:
        started = await editor.run("slow search")
        await editor.wait_for(lambda: editor.events(started["runId"], "toolCall"), 15, "the search")
        await editor.execute("agentLsp.cancel", {"runId": started["runId"]})
        await editor.wait_stop(started["runId"])
        await asyncio.sleep(0.3)
        assert rg_children(editor.process.pid) == [], "the cancel killed rg"
    finally:
        await editor.quit()


# -- editor diagnostics ------------------------------------------------------------------------
def diagnostics_caps():
    return attrs.evolve(capabilities("visual-studio-code"), experimental={"agentLsp": {"diagnostics": True}})


def problem(line: int, message: str, severity: int = 1, source: str = "pyright") -> dict:
    return {"range": {"start": {"line": line, "character": 4}, "end": {"line": line, "character": 9}},
            "severity": severity, "message": message, "source": source}


async def test_the_diagnostics_tool_shows_what_the_editor_shows(open_editor, model, workspace):
    model.add("problems", [calls({"name": "diagnostics", "arguments": {}}), {"text": "ok"}])
    editor = await open_editor(diagnostics_caps())
    uri = editor.uri("calc.py")
    editor.diagnostics[uri] = [problem(1, "Operator \"-\" is suspicious"), problem(4, "unused", 4, "ruff")]
    await stop(editor, "problems: what is wrong")
    tools = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "diagnostics" in tools
    assert tool_messages(model.requests[-1])["c0"].splitlines() == [
        'calc.py:2:5: error: Operator "-" is suspicious (pyright)', "calc.py:5:5: hint: unused (ruff)"]


async def test_an_applied_edit_reports_the_files_new_errors(open_editor, model, workspace):
    model.add("edit", [calls({"name": "edit_file", "arguments": {"path": "calc.py", "old_text": "a - b", "new_text": "a +"}}), {"text": "ok"}])
    editor = await open_editor(diagnostics_caps(), init=ALLOW)
    editor.open("calc.py")
    editor.diagnostics[editor.uri("calc.py")] = [problem(1, "Expected expression"), problem(1, "just a hint", 4)]
    await stop(editor, "edit it")
    result = tool_messages(model.requests[-1])["c0"]
    assert result.startswith("applied: edit calc.py")
    assert "calc.py:2:5: error: Expected expression (pyright)" in result and "just a hint" not in result
    asked = editor.diagnostics_requests[-1]
    assert asked["uris"] == [editor.uri("calc.py")] and asked["afterVersion"] == 2


async def test_without_the_capability_there_is_no_diagnostics_tool(open_editor, model, workspace):
    model.add("plain", [{"text": "ok"}])
    editor = await open_editor()
    await stop(editor, "plain")
    assert "diagnostics" not in {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert editor.diagnostics_requests == []


# -- multi-root ---------------------------------------------------------------------------------
async def test_two_workspace_folders(model, workspace, tmp_path):
    other = tmp_path / "other-project"
    other.mkdir()
    (other / "lib.py").write_text("def helper():\n    return 1\n")
    (other / "AGENTS.md").write_text("OTHER-MEMORY: second folder rule\n")
    (other / ".gitignore").write_text("secret.txt\n")
    (other / "secret.txt").write_text("helper in an ignored file\n")
    model.add("both", [calls({"name": "read_file", "arguments": {"path": "libs/lib.py"}},
                             {"name": "search", "arguments": {"pattern": "helper"}}),
                       calls({"name": "edit_file", "arguments": {"path": "libs/lib.py", "old_text": "return 1", "new_text": "return 2"}}),
                       {"text": "ok"}])
    editor = await start_editor(workspace, "visual-studio-code", init_options={"model": "m", "baseUrl": model.base_url, **ALLOW},
                                folders=[(workspace, "main"), (other, "libs")])
    try:
        report = await stop(editor, "both folders")
        first = tool_messages(model.requests[1])
        assert "def helper" in first["c0"]
        assert first["c1"].splitlines() == ["libs/lib.py:1: def helper():"], "the second folder's .gitignore applies"
        assert "OTHER-MEMORY" in model.requests[0]["messages"][0]["content"], "memory files per root"
        assert (other / "lib.py").read_text() == "def helper():\n    return 2\n"
        assert report["editedFiles"] == [(other / "lib.py").resolve().as_uri()]
    finally:
        await editor.quit()


# -- remember ----------------------------------------------------------------------------------
async def test_remember_asks_appends_deduplicates_and_is_recalled(open_editor, model, workspace):
    model.add("learn", [calls({"name": "remember", "arguments": {"note": "Run tests with: python -m pytest -q"}}),
                        {"tool_calls": [{"id": "again", "name": "remember", "arguments": {"note": "run tests with:  python -m pytest -q"}}]},
                        {"text": "noted"}])
    model.add("later", [{"text": "I recall"}])
    editor = await open_editor()
    editor.approval_answers = ["Allow"]
    await stop(editor, "learn the test command")
    memory = workspace / ".agent-lsp" / "memory.md"
    assert memory.read_text().endswith("- Run tests with: python -m pytest -q\n")
    assert len(editor.approval_requests) == 1 and "memory.md" in editor.approval_requests[0].message
    assert "already in .agent-lsp/memory.md" in tool_messages(model.requests[2])["again"]
    await stop(editor, "later session")
    assert "Run tests with: python -m pytest -q" in model.requests_for("later")[0]["messages"][0]["content"]


async def test_remember_refuses_when_memory_is_full(open_editor, model, workspace):
    (workspace / ".agent-lsp").mkdir()
    (workspace / ".agent-lsp/memory.md").write_text("- x\n" * 1200)
    model.add("full", [calls({"name": "remember", "arguments": {"note": "one more"}}), {"text": "ok"}])
    editor = await open_editor(init=ALLOW)
    await stop(editor, "full memory")
    assert "is full" in tool_messages(model.requests[-1])["c0"]
    assert os.path.getsize(workspace / ".agent-lsp/memory.md") == 4800
