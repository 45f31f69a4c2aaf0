"""`agent-lsp run` with the code-intel tools answered by a language server it starts itself
(basedpyright auto-detected on PATH), on a generated project with distractors (Receipt.total
beside Invoice.total, `total` in strings and comments, files that make an Invoice without asking
its total): find_references lists exactly the true calls where search also finds the
distractors; rename_symbol changes exactly them in one approved edit, and `agent-lsp rewind`
puts every file back. The server starts on the first call and is asked references at once (no
delay in the script): a just-started basedpyright answers from its open files only until it has
read the project, and the started-server source waits for that (issue 23)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from tests.headless.test_run_cli import agent_run, report_of
from tests.langservers.conftest import only_on_path, wait_gone
from tests.unit.codeintel_kit import make_project
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(180)


def test_references_and_rename_are_exact_where_search_is_not(model, tmp_path):
    root = (tmp_path / "proj").resolve()
    truth = make_project(root, files=60, every=10)
    before = {p: p.read_text() for p in (root / "pkg").glob("*.py")}
    model.add([
        # The server starts on these first calls: references are its very first question.
        tools_reply(call("symbols", "outline", path="pkg/models.py"),
                    call("find_references", "refs", path="pkg/models.py", line=5, symbol="total"),
                    call("search", "grep", pattern=r"\.total\("),
                    call("hover", "hov", path="pkg/mod_0010.py", line=6, symbol="total")),
        tools_reply(call("rename_symbol", "ren", path="pkg/models.py", line=5, symbol="total", newName="grand_total")),
        {"text": "renamed"},
    ])
    marker = uuid.uuid4().hex
    env = {**os.environ, "PATH": only_on_path(tmp_path, "basedpyright-langserver") + os.pathsep + os.environ["PATH"],
           "AGENT_LSP_TEST_MARK": marker}
    proc = subprocess.run(agent_run(model, root, "rename Invoice.total to grand_total"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=150, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "done", report
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert {"find_references", "rename_symbol", "find_definition", "hover", "symbols", "call_hierarchy"} <= offered
    assert "Use search for text" in model.requests[0]["messages"][0]["content"]

    results = last_tool_results(model.requests[1])
    assert results["outline"].splitlines()[:3] == ["pkg/models.py:", "4: class Invoice", "  5: method total"]
    expected = [f"{rel}:{line}:{len('    return invoice.') + 1}" for rel, line in truth["references"]]
    found = [line.split(": ", 1)[0] for line in results["refs"].splitlines()[1:] if line]
    assert found == expected, results["refs"]
    assert results["grep"].count(".total(") >= 3 * len(expected), "a text search also finds the distractors"
    assert "(method) def total() -> int" in results["hov"], results["hov"]

    renamed = last_tool_results(model.requests[2])["ren"]
    assert renamed.startswith(f"applied: rename `total` to `grand_total` in {len(expected) + 1} files"), renamed
    for rel in truth["callers"]:
        text = (root / rel).read_text()
        assert "invoice.grand_total()" in text and "receipt.total()" in text and "the total is" in text
    models = (root / "pkg/models.py").read_text()
    assert models.count("def grand_total") == 1 and models.count("def total") == 1, "Receipt.total stays"
    others = [p for p in (root / "pkg").glob("mod_*.py") if f"pkg/{p.name}" not in truth["callers"]]
    assert others and all(p.read_text() == before[p] for p in others)
    assert sorted(report["editedFiles"]) == sorted((root / r).as_uri() for r in ["pkg/models.py", *truth["callers"]])
    assert wait_gone(marker) == []

    rewound = subprocess.run([sys.executable, "-m", "agent_lsp", "rewind", report["runId"], "--workspace", str(root),
                              "--json"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    assert len(json.loads(rewound.stdout)["restored"]) == len(expected) + 1
    assert all(p.read_text() == text for p, text in before.items())
