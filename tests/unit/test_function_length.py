"""No function in agent_lsp/ is over 80 lines (CONTRACT Decision 72): counted from its `def` line
to its last line, decorators left out, nested functions inside their enclosing one's count (a
reader reads them as part of it)."""

from __future__ import annotations

import ast
from pathlib import Path

import agent_lsp

PACKAGE = Path(agent_lsp.__file__).parent
LIMIT = 80


def long_functions(tree: ast.Module, limit: int = LIMIT) -> dict[str, int]:
    """Qualified name (`Class.method`, `outer.inner`) -> lines, for each function over `limit`."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if lines > limit:
                    found[name] = lines
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def test_no_function_in_the_package_is_over_80_lines():
    over = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, lines in long_functions(tree).items():
            key = f"{path.relative_to(PACKAGE).as_posix()}::{name}"
            over[key] = lines
    assert over == {}


def test_the_counter_counts_from_def_to_the_last_line_without_decorators():
    body = "\n".join(f"    x = {i}" for i in range(79))
    source = (
        f"@decorator\n@another\ndef fits():\n{body}\n\n"  # def + 79 lines: 80
        f"class C:\n    async def method(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
        f"        y = 1\n"  # def + 80 lines: 81
    )
    assert long_functions(ast.parse(source)) == {"C.method": 81}
