"""read_file: lines with numbers, from the editor's buffer when the file is open."""

from __future__ import annotations

from pydantic import Field

from agent_lsp.agent.state.gitsafe import redact_git_secrets
from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError

MAX_READ_LINES = 2000
# A page of a file: whole lines up to this many characters. The rest is a read_file with an
# offset away, so a big file costs the context what the model looks at, not all of it (a 60 KB
# file re-sent with every later request was the bulk of a long session's bytes).
PAGE_CHARS = 12_000


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
    description = (
        "Read a text file (the editor's unsaved buffer if it is open), with line numbers; "
        f"a page of up to {PAGE_CHARS // 1000}K characters at a time "
        "(use offset/limit for the rest)."
    )
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
            text = redact_git_secrets(doc.text) if ctx.paths.in_git_dir(path) else doc.text
            lines = split_lines(text)
            start = (args.offset or 1) - 1
            count = min(args.limit or MAX_READ_LINES, MAX_READ_LINES)
            chosen = lines[start : start + count]
            if not lines:
                return f"{args.path}: (empty file)"
            if not chosen:
                raise ToolError(
                    f"offset {args.offset} is past the end of {args.path} ({len(lines)} lines)"
                )
            width = len(str(start + len(chosen)))
            shown: list[str] = []
            size = 0
            for i, line in enumerate(chosen):
                numbered = f"{start + i + 1:>{width}}\t{line}"
                if shown and size + len(numbered) + 1 > PAGE_CHARS and args.limit is None:
                    break
                shown.append(numbered)
                size += len(numbered) + 1
            body = "\n".join(shown)
            end = start + len(shown)
            if end < len(lines):
                body += (
                    f"\n[lines {start + 1}-{end} of {len(lines)}; {len(lines) - end} more: "
                    f"read_file with offset={end + 1}]"
                )
            return body

        return Prepared(f"read {args.path}", execute, paths=[(ctx.paths.given(args.path), path)])
