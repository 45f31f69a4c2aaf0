"""Path rules over the code-intel tools through `agent-lsp run` (CONTRACT Decision 28), with the
language server agent-lsp starts itself (basedpyright on PATH): an `Edit(…)` deny or ask rule
covers every file a `rename_symbol` would change, not only its `path` argument; a `Read(…)` deny
rule hides the locations in the files it covers."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of
from tests.langservers.conftest import only_on_path
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(180)

PRICES = "def price_of(item: str) -> int:\n    return len(item)\n"
USER = "from pkg.prices import price_of\n\n\ndef {name}() -> int:\n    return price_of('{name}')\n"


def project(root: Path) -> dict[Path, str]:
    (root / "pkg").mkdir(parents=True)
    (root / "secret").mkdir()
    files = {
        root / "pkg/__init__.py": "",
        root / "pkg/prices.py": PRICES,
        root / "pkg/shop.py": USER.format(name="shop"),
        root / "secret/__init__.py": "",
        root / "secret/vault.py": USER.format(name="vault"),
    }
    for path, text in files.items():
        path.write_text(text)
    (root / "pyrightconfig.json").write_text('{"include": ["pkg", "secret"]}\n')
    return files


def run(model, root: Path, tmp_path: Path, permissions: dict) -> tuple[dict, str]:
    Path(os.environ["AGENT_LSP_SETTINGS"]).write_text(json.dumps({"permissions": permissions}))
    on_path = tmp_path / "bin"
    if not on_path.is_dir():
        only_on_path(tmp_path, "basedpyright-langserver")
    env = {**os.environ, "PATH": str(on_path) + os.pathsep + os.environ["PATH"]}
    proc = subprocess.run(agent_run(model, root, "rename price_of"), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=150, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return report_of(proc.stdout), proc.stderr


def test_edit_and_read_rules_cover_every_file_of_a_rename_and_every_location(model, tmp_path):
    root = (tmp_path / "proj").resolve()
    before = project(root)
    model.add([
        tools_reply(call("find_references", "refs", path="pkg/prices.py", line=1, symbol="price_of"),
                    call("hover", "hov", path="secret/vault.py", line=5, symbol="price_of")),
        tools_reply(call("rename_symbol", "ren", path="pkg/prices.py", line=1, symbol="price_of", newName="cost_of")),
        {"text": "done"},
    ])
    report, _ = run(model, root, tmp_path, {"deny": ["Read(secret/**)", "Edit(secret/**)"]})
    refs = last_tool_results(model.requests[1])["refs"]
    assert "pkg/shop.py:5:" in refs and "secret/" not in refs, refs
    hover = last_tool_results(model.requests[1])["hov"]
    assert "denied by a Read(…) rule" in hover and "price_of(item" not in hover, hover
    renamed = last_tool_results(model.requests[2])["ren"]
    assert renamed.startswith("denied: the policy denies it"), renamed
    assert all(p.read_text() == text for p, text in before.items())
    assert report["denied"] == 1

    # An ask rule on one of the files asks even under --yes: with no terminal, nobody answers.
    model.add([
        tools_reply(call("rename_symbol", "ren2", path="pkg/prices.py", line=1, symbol="price_of", newName="cost_of")),
        {"text": "done"},
    ])
    report, err = run(model, root, tmp_path, {"ask": ["Edit(secret/vault.py)"]})
    renamed = last_tool_results(model.requests[-1])["ren2"]
    assert renamed.startswith("denied:"), renamed
    assert all(p.read_text() == text for p, text in before.items())

    # Without rules on its files the same rename is applied to both.
    model.add([
        tools_reply(call("rename_symbol", "ren3", path="pkg/prices.py", line=1, symbol="price_of", newName="cost_of")),
        {"text": "done"},
    ])
    report, _ = run(model, root, tmp_path, {"ask": ["Edit(other/**)"]})
    assert last_tool_results(model.requests[-1])["ren3"].startswith("applied:")
    assert "cost_of('vault')" in (root / "secret/vault.py").read_text()
