"""diagnostics: the problems the editor shows (every language server's), for a file or the
workspace; and the errors/warnings an applied edit left, once the editor caught up. Offered only
when the host can ask its editor (CONTRACT "Editor diagnostics", Decision 15)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from agent_lsp.agent.ports import diagnostics_of
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.paths import PathGuard, path_of_uri

SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
MAX_SHOWN = 200


def format_diagnostics(
    items: list[dict[str, Any]], paths: PathGuard, *, severe_only: bool = False
) -> list[str]:
    """`path:line:col: severity: message (source)` lines, sorted, positions 1-based."""
    lines: list[tuple[str, int, int, str]] = []
    for item in items:
        uri = str(item.get("uri", ""))
        path = path_of_uri(uri)
        shown = paths.display(path) if path is not None else uri
        for diagnostic in item.get("diagnostics") or []:
            severity = int(diagnostic.get("severity") or 1)
            if severe_only and severity > 2:
                continue
            start = (diagnostic.get("range") or {}).get("start") or {}
            line, col = int(start.get("line", 0)) + 1, int(start.get("character", 0)) + 1
            source = f" ({diagnostic['source']})" if diagnostic.get("source") else ""
            code = f" [{diagnostic['code']}]" if diagnostic.get("code") not in (None, "") else ""
            message = " ".join(str(diagnostic.get("message", "")).split())
            lines.append(
                (
                    shown,
                    line,
                    col,
                    f"{shown}:{line}:{col}: {SEVERITY.get(severity, 'error')}: "
                    f"{message}{code}{source}",
                )
            )
    return [text for *_, text in sorted(lines)]


async def problems_after_edit(ctx: ToolContext, path: Path, version: int | None) -> str:
    """What an applied edit left: the file's errors and warnings once the editor's language
    servers have caught up (the client waits for `afterVersion`, at most ~2 s)."""
    source = diagnostics_of(ctx.workspace)
    if source is None or not source.has_diagnostics:
        return ""
    items = await source.diagnostics([path], {path: version} if version is not None else None)
    if items is None:
        return ""
    lines = format_diagnostics(items, ctx.paths, severe_only=True)
    shown = ctx.paths.display(path)
    if not lines:
        return f"\nthe editor shows no errors or warnings in {shown}"
    more = f"\n… and {len(lines) - MAX_SHOWN} more" if len(lines) > MAX_SHOWN else ""
    return f"\nthe editor now shows in {shown}:\n" + "\n".join(lines[:MAX_SHOWN]) + more


class DiagnosticsArgs(Args):
    path: str | None = Field(
        None,
        description="A file (or folder) to limit the problems to; "
        "default: every file the editor knows",
    )


class Diagnostics(Tool):
    name = "diagnostics"
    description = (
        "The problems (errors, warnings, hints) the editor shows right now, "
        "from every language server, for a file or the whole workspace: "
        "`file:line:col: severity: message (source)`."
    )
    args = DiagnosticsArgs

    async def prepare(self, args: DiagnosticsArgs, ctx: ToolContext) -> Prepared:
        target = ctx.paths.resolve(args.path) if args.path else None
        source = diagnostics_of(ctx.workspace)
        if source is None:
            raise ToolError(
                "diagnostics are not available: the editor does not answer agentLsp/diagnostics"
            )

        async def execute() -> str:
            files = [target] if target is not None and not target.is_dir() else None
            items = await source.diagnostics(files, None)
            if items is None:
                raise ToolError("the editor did not answer the diagnostics request in time")
            if target is not None and target.is_dir():
                items = [i for i in items if _under(i, target)]
            lines = format_diagnostics(items, ctx.paths)
            if not lines:
                return f"no problems shown for {args.path or 'the workspace'}"
            more = (
                f"\n[… {len(lines) - MAX_SHOWN} more: narrow with path]"
                if len(lines) > MAX_SHOWN
                else ""
            )
            return "\n".join(lines[:MAX_SHOWN]) + more

        return Prepared(f"diagnostics {args.path or '(workspace)'}", execute)


def _under(item: dict[str, Any], folder: Path) -> bool:
    path = path_of_uri(str(item.get("uri", "")))
    if path is None:
        return False
    return path == folder or path.is_relative_to(folder)
