"""The language servers agent-lsp starts itself, with real servers from the test extra
(basedpyright and ty auto-detected on PATH, jedi-language-server configured): definition,
references, hover, rename and diagnostics on a generated project with distractors (a same-named
method on another class, the name in a comment and a string), with an emoji before the symbol."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.langservers.conftest import at, only_on_path, servers, tool, where

pytestmark = pytest.mark.timeout(180)


def _edits(workspace_edit: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for uri, edits in (workspace_edit.get("changes") or {}).items():
        out.setdefault(Path(uri.removeprefix("file://")).name, []).extend(edits)
    for change in workspace_edit.get("documentChanges") or []:
        name = Path(change["textDocument"]["uri"].removeprefix("file://")).name
        out.setdefault(name, []).extend(change["edits"])
    return out


async def test_auto_detected_basedpyright_answers_exactly_where_a_text_search_would_not(project, tmp_path):
    manager = servers(project, {}, path_env=only_on_path(tmp_path, "basedpyright-langserver"))
    try:
        assert [(s["name"], s["source"], s["state"]) for s in manager.found()] == [("basedpyright", "auto", "active")]
        (source,) = manager.sources()
        app, lib = project / "app.py", project / "lib.py"
        assert source.handles(app) and not source.handles(project / "README.md")
        await source.sync(app, app.read_text(encoding="utf-8"))

        found = await source.request("textDocument/definition", at(app, 5, "make"), app)  # after two emoji
        assert where(found) == [("lib.py", 11, "make")]

        refs = await source.request(
            "textDocument/references", at(lib, 2, "greet", context={"includeDeclaration": False}), lib
        )
        assert where(refs) == [("app.py", 5, "greet"), ("app.py", 7, "greet")]  # not Other.greet, comment, string

        hover = await source.request("textDocument/hover", at(app, 5, "greet"), app)
        assert "greet(name: str) -> str" in str(hover["contents"])

        edit = await source.request("textDocument/rename", at(lib, 2, "greet", newName="welcome"), lib)
        edits = _edits(edit)
        assert sorted((name, len(e)) for name, e in edits.items()) == [("app.py", 2), ("lib.py", 1)]
        assert all(e["newText"] == "welcome" for es in edits.values() for e in es)
        app_lines = app.read_text(encoding="utf-8").split("\n")
        assert sorted(e["range"]["start"]["line"] + 1 for e in edits["app.py"]) == [5, 7]
        assert "😀" in app_lines[4]
        assert source.position_encoding(app) == "utf-16" and manager.negotiated(source.spec, app) == "utf-16"
    finally:
        await manager.aclose()


async def test_ty_negotiates_utf8_and_positions_after_an_emoji_stay_exact_in_utf16(project, tmp_path):
    path_env = only_on_path(tmp_path, "ty", "basedpyright-langserver")
    manager = servers(project, {}, path_env=path_env)
    try:
        assert [(s["name"], s["state"]) for s in manager.found()] == [("ty", "active")]  # Decision 38's order
        (source,) = manager.sources()
        app = project / "app.py"
        found = await source.request("textDocument/definition", at(app, 5, "make"), app)
        assert manager.negotiated(source.spec, app) == "utf-8"
        assert where(found) == [("lib.py", 11, "make")]
        refs = await source.request(
            "textDocument/references", at(app, 5, "greet", context={"includeDeclaration": True}), app
        )
        assert where(refs) == [("app.py", 5, "greet"), ("app.py", 7, "greet"), ("lib.py", 2, "greet")]
        assert source.position_encoding(app) == "utf-16"
    finally:
        await manager.aclose()


async def test_a_configured_jedi_language_server_answers(project):
    jedi = tool("jedi-language-server")
    manager = servers(project, {"auto": False, "servers": {"jedi": {"command": [jedi], "extensions": ["py"]}}})
    try:
        assert [(s["name"], s["source"], s["extensions"]) for s in manager.found()] == [
            ("jedi", "configured", [".py"])
        ]
        (source,) = manager.sources()
        app = project / "app.py"
        found = await source.request("textDocument/definition", at(app, 7, "Greeter"), app)
        assert where(found) == [("lib.py", 1, "Greeter")]
        found = await source.request("textDocument/definition", at(app, 5, "make"), app)
        assert where(found) == [("lib.py", 11, "make")]
        hover = await source.request("textDocument/hover", at(app, 5, "make"), app)
        assert "make" in str(hover)
    finally:
        await manager.aclose()


async def test_auto_detection_starts_only_decision_38s_static_analysers(project, tmp_path):
    # jedi-language-server and pylsp run project code paths (plugins, the environment): only when configured
    path_env = only_on_path(tmp_path, "jedi-language-server")
    (tmp_path / "bin" / "pylsp").symlink_to("/bin/true")
    assert servers(project, {}, path_env=path_env).sources() == []
    assert servers(project, {}, path_env=path_env).found() == []
    analyser = only_on_path(tmp_path, "basedpyright-langserver")
    assert servers(project, {"auto": False}, path_env=analyser).found() == []
    # a configured server for .py wins over auto-detection: one server per language
    configured = servers(
        project,
        {"servers": {"jedi": {"command": [tool("jedi-language-server")], "extensions": [".py", ".pyi"]}}},
        path_env=analyser,
    )
    assert [s.name for s in configured.sources()] == ["jedi"]
    only_py = servers(project, {"servers": {"jedi": {"command": ["jedi-language-server"], "extensions": [".py"]}}},
                      path_env=analyser)
    assert [s["name"] for s in only_py.found()] == ["jedi"]  # not basedpyright for the .pyi left over


async def test_diagnostics_arrive_and_follow_an_edit(project, tmp_path):
    manager = servers(project, {}, path_env=only_on_path(tmp_path, "basedpyright-langserver"))
    try:
        app = project / "app.py"
        first = await manager.diagnostics([app], None)
        assert first is not None and first[0]["uri"] == app.as_uri()
        errors = [d for d in first[0]["diagnostics"] if d.get("severity") == 1]
        assert [d["range"]["start"]["line"] + 1 for d in errors] == [8], errors
        assert "not assignable" in errors[0]["message"]

        app.write_text(app.read_text(encoding="utf-8").replace('broken: int = "not an int"', "fixed: int = 1"))
        after = await manager.diagnostics([app], {app: 2})  # an edit landed: fresh diagnostics awaited
        assert after is not None
        assert [d for d in after[0]["diagnostics"] if d.get("severity") == 1] == []
        everything = await manager.diagnostics(None, None)
        assert [item["uri"] for item in everything or []] == [app.as_uri()]
        assert await manager.diagnostics([project / "notes.md"], None) is None  # no server for .md
    finally:
        await manager.aclose()


async def test_the_servers_settings_answer_its_workspace_configuration(project, tmp_path):
    """basedpyright pulls `basedpyright.analysis` over workspace/configuration: type checking
    off, the assignment error is gone."""
    command = [tool("basedpyright-langserver"), "--stdio"]
    settings = {"basedpyright": {"analysis": {"typeCheckingMode": "off"}}}
    manager = servers(
        project,
        {"auto": False, "servers": {"bp": {"command": command, "extensions": [".py"], "settings": settings}}},
    )
    try:
        app = project / "app.py"
        found = await manager.diagnostics([app], None)
        assert found is not None
        assert [d for d in found[0]["diagnostics"] if d.get("severity") == 1] == []
    finally:
        await manager.aclose()
