"""rename_symbol through the LSP server for a stock client, answered by a language server it
starts itself (configured in initializationOptions): ONE approval (its stream event lists every
file with its diff, its message shows them), ONE workspace/applyEdit for every file (an open
buffer's edit carrying its version), and agentLsp.rewind restores every file."""

from __future__ import annotations

import pytest

from tests.langservers.conftest import tool
from tests.unit.codeintel_kit import make_project

pytestmark = pytest.mark.timeout(150)


def calls(*items: dict, **extra) -> dict:
    return {"tool_calls": [{"id": f"c{i}", **item} for i, item in enumerate(items)], **extra}


async def test_rename_is_one_approval_with_files_one_apply_edit_and_one_rewind(open_editor, model, workspace):
    root = workspace.resolve()
    truth = make_project(root, files=30, every=10)
    before = {p: p.read_text() for p in (root / "pkg").glob("*.py")}
    where = {"path": "pkg/models.py", "line": 5, "symbol": "total"}
    model.add("RENAME", [
        # the server starts on this call: the rename is its very first question, asked only once it
        # has read the project (issue 23)
        calls({"name": "rename_symbol", "arguments": {**where, "newName": "grand_total"}}),
        {"text": "renamed"},
    ])
    servers = {"auto": False, "servers": {"bp": {"command": [tool("basedpyright-langserver"), "--stdio"],
                                                  "extensions": [".py"]}}}
    editor = await open_editor(init={"languageServers": servers})
    opened = editor.open("pkg/mod_0010.py")
    editor.approval_answers = ["Allow"]
    started = await editor.run("RENAME Invoice.total to grand_total")
    report = await editor.wait_stop(started["runId"], 120)
    assert report["stopReason"] == "done", report

    files = ["pkg/models.py", *truth["callers"]]
    assert len(editor.approval_requests) == 1
    message = editor.approval_requests[0].message
    assert f"rename `total` to `grand_total` in {len(files)} files" in message
    assert all(f"+++ b/{rel}" in message or rel in message for rel in files)
    pending = [e for e in editor.events(started["runId"], "approval") if e["state"] == "pending"]
    assert len(pending) == 1 and pending[0]["tool"] == "rename_symbol"
    assert sorted(f["uri"] for f in pending[0]["files"]) == sorted((root / r).as_uri() for r in files)
    assert all("grand_total" in f["diff"] for f in pending[0]["files"])

    assert len(editor.edits) == 1, "one workspace/applyEdit for every file"
    changes = editor.edits[0].edit.document_changes
    assert sorted(c.text_document.uri for c in changes) == sorted((root / r).as_uri() for r in files)
    assert next(c for c in changes if c.text_document.uri == opened).text_document.version == 1
    assert "invoice.grand_total() + 10" in editor.text("pkg/mod_0010.py")
    for rel in truth["callers"]:
        if rel != "pkg/mod_0010.py":
            assert "invoice.grand_total()" in (root / rel).read_text()
    untouched = [p for p in (root / "pkg").glob("mod_*.py") if f"pkg/{p.name}" not in truth["callers"]]
    assert all(p.read_text() == before[p] for p in untouched)

    result = await editor.execute("agentLsp.rewind", {"runId": report["runId"]})
    assert sorted(result["restored"]) == sorted((root / r).as_uri() for r in files), result
    assert len(editor.edits) == 2, "the rewind is one more applyEdit"
    assert editor.text("pkg/mod_0010.py") == before[root / "pkg/mod_0010.py"]
    assert all(p.read_text() == text for p, text in before.items() if p.name != "mod_0010.py")
