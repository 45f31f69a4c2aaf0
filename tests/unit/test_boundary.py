"""The agent core knows no editor and starts fast: no pygls/lsprotocol under agent_lsp/agent,
and importing the run module does not import openai."""

from __future__ import annotations

import ast
import gc
import subprocess
import sys
from pathlib import Path

import agent_lsp.agent

CORE = Path(agent_lsp.agent.__file__).parent
FORBIDDEN = {"pygls", "lsprotocol"}


def _parse(path: Path) -> ast.Module:
    # CPython 3.11.7: a garbage collection during ast.parse that runs a finaliser which prints
    # a traceback (the traceback's carets parse source too) fails the outer parse with
    # "AST constructor recursion depth mismatch". Seen in CI; no collection runs meanwhile.
    gc.collect()
    gc.disable()
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    finally:
        gc.enable()


def _imported_modules(path: Path) -> set[str]:
    tree = _parse(path)
    found: set[str] = set()
    for node in ast.walk(tree):  # every import, also inside functions and TYPE_CHECKING blocks
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__"):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def test_core_modules_are_found():
    modules = sorted(CORE.rglob("*.py"))
    names = {p.relative_to(CORE).as_posix() for p in modules}
    assert {"loop.py", "run.py", "model.py", "tools/files.py"} <= names


def test_the_core_imports_no_editor_protocol():
    offenders = {}
    for path in sorted(CORE.rglob("*.py")):
        bad = {m for m in _imported_modules(path) if m.split(".")[0] in FORBIDDEN}
        if bad:
            offenders[path.relative_to(CORE).as_posix()] = sorted(bad)
    assert offenders == {}


def test_the_checker_would_catch_an_import(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text("def f():\n    from lsprotocol import types\n    import pygls.server\n")
    assert {"lsprotocol", "pygls.server"} <= _imported_modules(sample)


def test_importing_the_core_does_not_import_openai_or_the_protocol():
    code = (
        "import sys\n"
        "import agent_lsp.agent.run, agent_lsp.agent.loop, agent_lsp.agent.model, agent_lsp.headless\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'pygls', 'lsprotocol'))\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]", out.stdout
