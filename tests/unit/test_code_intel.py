"""The code-intel tools against LSP answers recorded from a real language server
(basedpyright): positions from a 1-based line + the symbol's text, in UTF-16 (an emoji before the
symbol counts two) and UTF-8, results as `path:line:col: line` grouped per file and capped, the
answer shapes LSP allows (Location/LocationLink, DocumentSymbol/SymbolInformation,
MarkupContent/MarkedString), sources asked in order, and rename's WorkspaceEdit applied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.tools.base import ToolContext, ToolError
from agent_lsp.agent.tools.codeintel.navigate import (
    CallHierarchy,
    FindDefinition,
    FindReferences,
    Hover,
)
from agent_lsp.agent.tools.codeintel.outline import Symbols
from agent_lsp.agent.tools.codeintel.positions import TextIndex, find_symbol, to_column, to_units
from agent_lsp.agent.tools.codeintel.rename import RenameSymbol, apply_text_edits, edits_by_uri
from agent_lsp.agent.tools.codeintel.sources import CodeIntel
from agent_lsp.agent.tools.paths import PathGuard
from tests.unit.codeintel_kit import RecordedSource, ScriptedSource

pytestmark = pytest.mark.timeout(30)

EMOJI_LINE = '    label = "🎉 area"; return sum(c.area() for c in shapes)'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    RecordedSource.write_project(root)
    return root.resolve()


def context(root: Path, *sources: Any, readable: set[Path] | None = None) -> ToolContext:
    readable = set() if readable is None else readable
    ctx = ToolContext(workspace=DiskWorkspace([root]), paths=PathGuard([root], extra_readable=readable))
    ctx.code_intel = CodeIntel(list(sources), readable.add)
    return ctx


async def use(tool: Any, ctx: ToolContext, **arguments: Any) -> str:
    prepared = await tool.prepare(tool.parse(arguments), ctx)
    return await prepared.execute()


# -- positions ---------------------------------------------------------------------------------

def test_an_emoji_before_the_symbol_counts_two_utf16_units_four_utf8_bytes_one_character():
    column = find_symbol(EMOJI_LINE, "area", 2)  # the first `area` is in the string
    assert EMOJI_LINE[column:column + 6] == "area()"
    assert to_units(EMOJI_LINE, column, "utf-16") == column + 1
    assert to_units(EMOJI_LINE, column, "utf-8") == column + 3
    assert to_units(EMOJI_LINE, column, "utf-32") == column
    for encoding in ("utf-16", "utf-8", "utf-32"):
        assert to_column(EMOJI_LINE, to_units(EMOJI_LINE, column, encoding), encoding) == column
    assert to_column("ab", 99, "utf-16") == 2, "past the line's end: clamped"


def test_symbol_is_a_whole_identifier_and_a_miss_shows_the_line():
    assert find_symbol("surface_area = area(x)", "area") == 15
    with pytest.raises(ToolError, match=r"`are` is not on that line.*'surface_area = area\(x\)'"):
        find_symbol("surface_area = area(x)", "are")
    with pytest.raises(ToolError, match="occurs 1 time"):
        find_symbol("area(x)", "area", 2)


def test_lsp_lines_split_on_cr_too_and_offsets_clamp():
    index = TextIndex("a\r\nb🎉c\rd\n")
    assert index.lines == ["a", "b🎉c", "d", ""]
    assert index.offset({"line": 1, "character": 3}, "utf-16") == 3 + 2  # after the emoji
    assert index.offset({"line": 9, "character": 0}, "utf-16") == len(index.text)


# -- the tools on recorded answers -------------------------------------------------------------

async def test_find_definition_takes_the_nth_occurrence_and_prints_path_line_col(project: Path):
    source = RecordedSource(project)
    ctx = context(project, source)
    out = await use(FindDefinition(), ctx, path="pkg/use.py", line=5, symbol="area", occurrence=2)
    assert out == "pkg/shapes.py:8:9: def area(self) -> float:"
    assert not source.misses
    assert source.synced[0] == (project / "pkg/use.py", (project / "pkg/use.py").read_text())


async def test_definition_from_a_line_with_an_emoji_sends_the_utf16_position(project: Path):
    source = RecordedSource(project)
    out = await use(FindDefinition(), context(project, source), path="pkg/shapes.py", line=21, symbol="area",
                    occurrence=2)
    assert not source.misses, "the position sent is the one basedpyright was asked (UTF-16)"
    assert out.startswith("pkg/shapes.py:8:9:")


async def test_find_references_groups_per_file_and_gives_columns_in_characters(project: Path):
    source = RecordedSource(project)
    out = await use(FindReferences(), context(project, source), path="pkg/shapes.py", line=8, symbol="area")
    column = EMOJI_LINE.index("c.area") + 3  # 1-based, in characters: the emoji counts one
    assert out.splitlines() == [
        "2 references in 2 files",
        f"pkg/shapes.py:21:{column}: {EMOJI_LINE.strip()}",
        "",
        'pkg/use.py:5:17: print("area", c.area(), s.area())',
    ]
    assert source.asked[0][1]["context"] == {"includeDeclaration": False}


async def test_hover_symbols_and_call_hierarchy(project: Path):
    source = RecordedSource(project)
    ctx = context(project, source)
    assert "def area(self: Self@Circle) -> float" in await use(Hover(), ctx, path="pkg/shapes.py", line=8, symbol="area")
    outline = await use(Symbols(), ctx, path="pkg/shapes.py")
    assert outline.splitlines() == [
        "pkg/shapes.py:", "4: class Circle", "  5: method __init__", "  8: method area", "  6: variable radius",
        "12: class Square", "  13: method __init__", "  16: method area", "  14: variable side", "20: function total"]
    found = await use(Symbols(), ctx, query="area")
    assert found.splitlines() == [
        "2 symbols matching 'area':",
        "pkg/shapes.py:8:9: method area (in Circle)",
        "pkg/shapes.py:16:9: method area (in Square)",
    ]
    calls = await use(CallHierarchy(), ctx, path="pkg/shapes.py", line=8, symbol="area", direction="incoming")
    assert calls.splitlines()[0] == "2 callers of `area`:"
    assert "total — defined at pkg/shapes.py:20:5" in calls
    assert 'call at pkg/use.py:5:17: print("area", c.area(), s.area())' in calls
    assert not source.misses


async def test_rename_applies_the_recorded_workspace_edit_to_every_file(project: Path):
    source = RecordedSource(project)
    ctx = context(project, source)
    prepared = await RenameSymbol().prepare(
        RenameSymbol().parse({"path": "pkg/shapes.py", "line": 8, "symbol": "area", "newName": "surface"}), ctx)
    assert [m for m, _ in source.asked] == ["textDocument/prepareRename", "textDocument/rename"]
    assert prepared.detail.splitlines()[0] == "rename `area` to `surface` in 2 files: pkg/shapes.py, pkg/use.py"
    assert [f["uri"] for f in prepared.files or []] == [(project / f"pkg/{n}.py").as_uri() for n in ("shapes", "use")]
    assert "+    def surface(self) -> float:" in (prepared.files or [])[0]["diff"]
    out = await prepared.execute()
    assert out.startswith("applied: rename `area` to `surface` in 2 files")
    shapes = (project / "pkg/shapes.py").read_text()
    assert "def surface(self) -> float:\n        return 3.14" in shapes
    assert "return self.side * self.side" in shapes and shapes.count("def area") == 1, "Square.area stays"
    assert 'label = "🎉 area"; return sum(c.surface() for c in shapes)' in shapes
    assert (project / "pkg/use.py").read_text().splitlines()[4] == 'print("area", c.surface(), s.area())'
    assert list(ctx.changes) == [project / "pkg/shapes.py", project / "pkg/use.py"]


# -- answer shapes, sources, caps, files outside the workspace ----------------------------------

async def test_location_links_and_utf8_servers(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "a.py").write_text(f"{EMOJI_LINE}\n", encoding="utf-8")
    col8 = len(EMOJI_LINE[: EMOJI_LINE.index("c.area") + 2].encode())

    def definition(params: dict[str, Any]) -> Any:
        assert params["position"] == {"line": 0, "character": col8}
        rng = {"start": {"line": 0, "character": col8}, "end": {"line": 0, "character": col8 + 4}}
        return [{"targetUri": (root / "a.py").as_uri(), "targetRange": rng, "targetSelectionRange": rng}]

    source = ScriptedSource({"textDocument/definition": definition}, encoding="utf-8")
    out = await use(FindDefinition(), context(root, source), path="a.py", line=1, symbol="area", occurrence=2)
    assert out == f"a.py:1:{EMOJI_LINE.index('c.area') + 3}: {EMOJI_LINE.strip()}"


async def test_symbol_information_outline_and_marked_string_hover(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "a.py").write_text("class A:\n    def f(self): pass\n", encoding="utf-8")
    uri = (root / "a.py").as_uri()
    at = lambda line: {"uri": uri, "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 1}}}  # noqa: E731
    source = ScriptedSource({
        "textDocument/documentSymbol": [{"name": "A", "kind": 5, "location": at(0)},
                                        {"name": "f", "kind": 6, "location": at(1), "containerName": "A"}],
        "textDocument/hover": {"contents": [{"language": "python", "value": "def f(self) -> None"}, "Does f."]},
    })
    ctx = context(root, source)
    assert (await use(Symbols(), ctx, path="a.py")).splitlines() == ["a.py:", "1: class A", "2: method f (in A)"]
    assert await use(Hover(), ctx, path="a.py", line=2, symbol="f") == "```python\ndef f(self) -> None\n```\n\nDoes f."


async def test_sources_in_order_fall_through_only_to_one_that_handles_the_file(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "a.py").write_text("x = 1\n", encoding="utf-8")
    (root / "notes.md").write_text("x\n", encoding="utf-8")
    loc = [{"uri": (root / "a.py").as_uri(), "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}]
    editor = ScriptedSource({"textDocument/definition": None}, name="editor", suffixes=(".py", ".md"))
    other = ScriptedSource({"textDocument/definition": loc}, name="pyright")
    ctx = context(root, editor, other)
    assert await use(FindDefinition(), ctx, path="a.py", line=1, symbol="x") == "a.py:1:1: x = 1"
    assert len(editor.asked) == len(other.asked) == 1
    assert await use(FindDefinition(), ctx, path="notes.md", line=1, symbol="x") == (
        "the language server found no definition of `x` there")
    assert len(other.asked) == 1, "pyright does not handle .md files: not asked"
    with pytest.raises(ToolError, match=r"no language server answers for \.txt files; use search"):
        (root / "b.txt").write_text("x\n")
        await use(FindDefinition(), ctx, path="b.txt", line=1, symbol="x")
    failing = ScriptedSource({"textDocument/definition": RuntimeError("server crashed twice")})
    with pytest.raises(ToolError, match="server crashed twice"):
        await use(FindDefinition(), context(root, failing), path="a.py", line=1, symbol="x")


async def test_references_are_capped_at_200_with_the_total_said(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "a.py").write_text("".join(f"x{i} = x\n" for i in range(250)), encoding="utf-8")
    refs = [{"uri": (root / "a.py").as_uri(), "range": {"start": {"line": i, "character": 5}, "end": {"line": i, "character": 6}}}
            for i in range(250)]
    out = await use(FindReferences(), context(root, ScriptedSource({"textDocument/references": refs})),
                    path="a.py", line=1, symbol="x", includeDeclaration=True)
    lines = out.splitlines()
    assert lines[0] == "250 references in 1 file" and len(lines) == 1 + 200 + 1
    assert lines[-1] == "[… 50 more not shown: 250 in all]"


async def test_a_location_outside_the_workspace_is_absolute_and_readable_for_the_session(tmp_path: Path):
    root, lib = (tmp_path / "w").resolve(), (tmp_path / "lib").resolve()
    root.mkdir()
    lib.mkdir()
    (root / "a.py").write_text("import os\n", encoding="utf-8")
    (lib / "os.py").write_text("# os\ndef getcwd(): ...\n", encoding="utf-8")
    loc = [{"uri": (lib / "os.py").as_uri(), "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 10}}}]
    readable: set[Path] = set()
    ctx = context(root, ScriptedSource({"textDocument/definition": loc}), readable=readable)
    out = await use(FindDefinition(), ctx, path="a.py", line=1, symbol="os")
    assert out == f"{lib / 'os.py'}:2:5: def getcwd(): ..."
    assert readable == {lib / "os.py"}
    assert ctx.paths.resolve(str(lib / "os.py"), for_read=True) == lib / "os.py"


# -- WorkspaceEdit -----------------------------------------------------------------------------

def test_text_edits_apply_in_utf16_and_refuse_overlaps():
    text = 'x = "🎉"; y = total([c])\n'
    col = text.index("total")
    edits = [{"range": {"start": {"line": 0, "character": col + 1}, "end": {"line": 0, "character": col + 6}}, "newText": "grand"}]
    assert apply_text_edits(text, edits, "utf-16") == 'x = "🎉"; y = grand([c])\n'
    with pytest.raises(ToolError, match="overlapping"):
        apply_text_edits("abcdef", [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}}, "newText": ""},
                                    {"range": {"start": {"line": 0, "character": 2}, "end": {"line": 0, "character": 4}}, "newText": ""}],
                         "utf-16")


def test_workspace_edit_changes_and_document_changes_and_file_operations():
    edit = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}, "newText": "y"}
    assert edits_by_uri({"changes": {"file:///a.py": [edit]}}) == {"file:///a.py": [edit]}
    both = {"changes": {"file:///ignored.py": [edit]},
            "documentChanges": [{"textDocument": {"uri": "file:///a.py", "version": 3}, "edits": [edit]},
                                {"textDocument": {"uri": "file:///a.py", "version": 3}, "edits": [edit]}]}
    assert edits_by_uri(both) == {"file:///a.py": [edit, edit]}
    with pytest.raises(ToolError, match="would rename a file"):
        edits_by_uri({"documentChanges": [{"kind": "rename", "oldUri": "file:///a.py", "newUri": "file:///b.py"}]})


async def test_rename_refused_cleanly_when_the_server_cannot_rename_there(project: Path):
    source = RecordedSource(project)
    tool = RenameSymbol()
    with pytest.raises(ToolError, match="cannot rename `Shapes` at pkg/shapes.py:1"):
        await tool.prepare(tool.parse({"path": "pkg/shapes.py", "line": 1, "symbol": "Shapes", "newName": "S"}),
                           context(project, source))
    moving = ScriptedSource({"textDocument/rename": {"documentChanges": [
        {"kind": "create", "uri": (project / "new.py").as_uri()}]}})
    with pytest.raises(ToolError, match="renames that create, move or delete files are refused"):
        await tool.prepare(tool.parse({"path": "pkg/shapes.py", "line": 8, "symbol": "area", "newName": "s"}),
                           context(project, moving))
    assert (project / "pkg/shapes.py").read_text().count("def area") == 2, "nothing changed"


async def test_the_source_sees_unsaved_editor_buffers_before_it_answers(tmp_path: Path):
    root = tmp_path.resolve()
    (root / "a.py").write_text("x = 1\n")
    (root / "b.py").write_text("import a\n")
    (root / "c.py").write_text("y = 2\n")

    class Buffers(DiskWorkspace):
        def open_texts(self) -> dict[Path, str]:
            return {root / "b.py": "import a\nprint(a.x)\n", root / "c.py": "y = 2\n"}

        async def unsaved(self, paths: list[Path]) -> list[Path]:
            return [p for p in paths if p.read_text() != self.open_texts()[p]]

    source = ScriptedSource({"textDocument/references": None})
    ctx = context(root, source)
    ctx.workspace = Buffers([root])
    await use(FindReferences(), ctx, path="a.py", line=1, symbol="x")
    assert source.synced == [(root / "a.py", "x = 1\n"), (root / "b.py", "import a\nprint(a.x)\n")]
