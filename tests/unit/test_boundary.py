"""The agent core knows no editor and starts fast: no pygls/lsprotocol under agent_lsp/agent,
and importing the run module does not import openai."""

from __future__ import annotations

import ast
import functools
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
    assert {"loop/loop.py", "loop/run.py", "model/client.py", "tools/files.py", "state/session.py"} <= names


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
        "import agent_lsp.agent.loop.run, agent_lsp.agent.loop.loop, agent_lsp.agent.model.client, agent_lsp.terminal.run\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'pygls', 'lsprotocol'))\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# -- the import graph of the whole package (issue 22) -------------------------------------------
PACKAGE = CORE.parent
OUTSIDE_THE_CORE = (
    "server", "acp", "mcp", "terminal", "cli", "demo", "testing", "telemetry", "langservers",
)


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports: every import (inside functions and
    TYPE_CHECKING blocks too), relative ones resolved, and the parent packages whose __init__
    an import runs."""
    files = {_module_name(p, root): p for p in root.rglob("*.py")}
    package = root.name

    def known(name: str) -> str:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Import):
                found.update(known(a.name) for a in node.names if a.name.split(".")[0] == package)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                if base.split(".")[0] == package:
                    found.update(known(f"{base}.{a.name}") if f"{base}.{a.name}" in files else known(base) for a in node.names)
        for target in list(found):
            parts = target.split(".")
            found.update(".".join(parts[:k]) for k in range(2, len(parts)))  # the parents' __init__ run first
        found.discard(name)
        found.discard("")
        graph[name] = found
    return graph


@functools.cache
def package_graph() -> dict[str, set[str]]:
    """The package's graph, read once for every test of this file (each parse is slow)."""
    return import_graph(PACKAGE)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_anywhere_in_the_package():
    assert cycles(package_graph()) == []


def test_the_core_imports_no_front_end_and_no_integration():
    graph = package_graph()
    outside = tuple(f"{PACKAGE.name}.{name}" for name in OUTSIDE_THE_CORE)
    core = f"{PACKAGE.name}.{CORE.name}"
    offenders = {m: sorted(d for d in deps if d.startswith(outside)) for m, deps in graph.items()
                 if (m == core or m.startswith(core + ".")) and any(d.startswith(outside) for d in deps)}
    assert offenders == {}


def test_the_graph_checker_finds_a_cycle_through_a_package_init_and_a_type_only_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub import b\n")  # a re-exporting __init__
    (pkg / "sub" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n")
    (pkg / "c.py").write_text("def f():\n    from .sub.b import x\n")
    (pkg / "d.py").write_text("import pkg.c\n")
    assert cycles(import_graph(pkg)) == [["pkg.c", "pkg.sub", "pkg.sub.b"]]


# -- the core's layers: each imports only its own layer and the ones below it -------------------
# The shared vocabulary (events and messages, the ports, display helpers) is the floor; then the
# OS (exec: processes, the reaper, the sandbox, the key guard), files (fs: safe I/O, the disk
# workspace, walking and ripgrep), the model client, run state (session, store, transcript,
# checkpoints, rewind), the tools, the approval policy, the loop, and the host on top.
CORE_LAYERS = ("vocabulary", "exec", "fs", "model", "state", "tools", "policy", "loop", "host")
VOCABULARY = ("messages", "events", "ports", "display", "coalesce", "images", "wellformed")  # images: a prompt's attachments; events: the typed stream events every front end reads
HOST = ("host", "host_rewind", "host_sessions")


def core_layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != [PACKAGE.name, CORE.name] or len(parts) < 3:
        return None
    if parts[2] in VOCABULARY:
        return "vocabulary"
    if parts[2] in HOST:
        return "host"
    return parts[2] if parts[2] in CORE_LAYERS else "unplaced"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, deps in sorted(graph.items()):
        here = core_layer(module)
        for dep in sorted(deps):
            there = core_layer(dep)
            if here is None or there is None or (len(dep.split(".")) == 3 and there not in ("vocabulary", "host")):
                continue  # outside the core, or a layer's (empty) package __init__
            if "unplaced" in (here, there) or CORE_LAYERS.index(there) > CORE_LAYERS.index(here):
                found.append(f"{module} -> {dep}")
    return found


def test_every_core_module_sits_in_a_layer_and_imports_only_downwards():
    graph = package_graph()
    assert upward_imports(graph) == []
    layers = {core_layer(m) for m in graph} - {None}
    assert layers == set(CORE_LAYERS), layers


def test_the_layer_checker_catches_an_upward_import_and_an_unplaced_module():
    core = f"{PACKAGE.name}.{CORE.name}"
    graph = {f"{core}.state.session": {f"{core}.loop.context", f"{core}.fs.safeio", f"{core}.messages", f"{core}.loop"},
             f"{core}.misc": {f"{core}.messages"}}
    assert upward_imports(graph) == [f"{core}.misc -> {core}.messages", f"{core}.state.session -> {core}.loop.context"]


# -- the package's floors: nothing imports a floor above its own (issue 33) ---------------------
# Settings (and the scripted model server, which imports nothing of ours) at the bottom; the agent
# core on them; the integrations the core knows only through its ports; the services the front
# ends share (the run's composition, `doctor`'s checks, `agentLsp.setup`'s view); the front ends;
# and the entry points that pick one. A module may import its own floor and the ones below.
FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("__init__", "settings_schema", "settings", "testing")),
    ("core", ("agent",)),
    ("integrations", ("telemetry", "langservers", "mcp", "permissions")),
    ("shared by the front ends", ("frontend", "health", "setup_view")),
    ("front ends", ("server", "acp", "terminal", "action")),
    ("entry points", ("cli", "cli_parser", "demo", "__main__")),
)


def floor_of(module: str, package: str = PACKAGE.name) -> int | None:
    """The floor's index (0 at the bottom); None outside the package; -1 for an unplaced one."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    top = parts[1] if len(parts) > 1 else "__init__"
    return next((i for i, (_, names) in enumerate(FLOORS) if top in names), -1)


def upward_floor_imports(graph: dict[str, set[str]], package: str = PACKAGE.name) -> list[str]:
    found = []
    for module, deps in sorted(graph.items()):
        here = floor_of(module, package)
        if here is None:
            continue
        if here == -1:
            found.append(f"{module}: on no floor")
            continue
        for dep in sorted(deps):
            there = floor_of(dep, package)
            if there is not None and (there == -1 or there > here):
                found.append(f"{module} -> {dep}")
    return found


def test_every_module_sits_on_a_floor_and_imports_none_above_it():
    graph = package_graph()
    assert upward_floor_imports(graph) == []
    tops = {m.split(".")[1] if "." in m else "__init__" for m in graph}
    placed = {name for _, names in FLOORS for name in names}
    assert tops == placed, tops ^ placed  # a floor naming a module that is gone is stale


def test_the_floor_checker_catches_an_upward_import_and_an_unplaced_module(tmp_path):
    pkg = tmp_path / "agent_lsp"
    (pkg / "agent" / "exec").mkdir(parents=True)
    (pkg / "mcp").mkdir()
    for init in ("__init__.py", "agent/__init__.py", "agent/exec/__init__.py", "mcp/__init__.py"):
        (pkg / init).write_text("")
    (pkg / "settings.py").write_text("def f():\n    from agent_lsp.agent.exec import keyguard\n")
    (pkg / "agent" / "exec" / "keyguard.py").write_text("from agent_lsp import settings\n")
    (pkg / "mcp" / "terminal.py").write_text("from agent_lsp.terminal.style import Style\n")
    (pkg / "terminal.py").write_text("")
    (pkg / "extra.py").write_text("import agent_lsp.settings\n")
    found = upward_floor_imports(import_graph(pkg), "agent_lsp")
    assert found == [
        "agent_lsp.extra: on no floor",
        "agent_lsp.mcp.terminal -> agent_lsp.terminal",
        "agent_lsp.settings -> agent_lsp.agent",
        "agent_lsp.settings -> agent_lsp.agent.exec",
        "agent_lsp.settings -> agent_lsp.agent.exec.keyguard",
    ]
