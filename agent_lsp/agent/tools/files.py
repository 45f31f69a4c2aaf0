"""read_file: lines with numbers, from the editor's buffer when the file is open."""

from __future__ import annotations

from pydantic import Field

from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError

MAX_READ_LINES = 2000


def split_lines(text: str) -> list[str]:
    """Lines as editors and `\n`-counting tools see them (str.splitlines also splits on form
    feeds and U+2028, which would shift every line number after one)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


class ReadFileArgs(Args):
    path: str = Field(description="File path, relative to the workspace")
    offset: int | None = Field(None, ge=1, description="First line to read, 1-based")
    limit: int | None = Field(None, ge=1, description="How many lines to read")


class ReadFile(Tool):
    name = "read_file"
    description = "Read a text file (the editor's unsaved buffer if it is open), with line numbers."
    args = ReadFileArgs

    async def prepare(self, args: ReadFileArgs, ctx: ToolContext) -> Prepared:
        path = ctx.paths.resolve(args.path, for_read=True)

        async def execute() -> str:
            if path.is_dir():
                raise ToolError(f"{args.path} is a directory; use list_files")
            try:
                doc = await ctx.workspace.read(path)
            except ValueError as exc:
                raise ToolError(str(exc)) from None
            lines = split_lines(doc.text)
            start = (args.offset or 1) - 1
            count = min(args.limit or MAX_READ_LINES, MAX_READ_LINES)
            chosen = lines[start : start + count]
            if not lines:
                return f"{args.path}: (empty file)"
            if not chosen:
                raise ToolError(f"offset {args.offset} is past the end of {args.path} ({len(lines)} lines)")
            width = len(str(start + len(chosen)))
            body = "\n".join(f"{start + i + 1:>{width}}\t{line}" for i, line in enumerate(chosen))
            if start + len(chosen) < len(lines):
                body += f"\n[{len(lines) - start - len(chosen)} more lines: read with offset={start + len(chosen) + 1}]"
            return body

        return Prepared(f"read {args.path}", execute)
