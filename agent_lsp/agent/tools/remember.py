"""remember: one line appended to the workspace's `.agent-lsp/memory.md` (a convention, a pitfall
found), applied like any edit (it asks), so later sessions recall it. Memory costs context in
every run: notes are deduplicated and the file is capped."""

from __future__ import annotations

from pydantic import Field

from agent_lsp.agent.tools.base import Args, Prepared, Tool, ToolContext, ToolError
from agent_lsp.agent.tools.edits import _current, _prepared

MEMORY_FILE = ".agent-lsp/memory.md"
MAX_NOTE = 300
MAX_MEMORY = 4000  # characters: about 1,000 tokens in every later run's system prompt
HEADER = (
    "# Agent memory\n\n"
    "Notes agent-lsp recalls in every session of this workspace (edit freely).\n\n"
)


def _normal(text: str) -> str:
    return " ".join(text.lower().removeprefix("- ").split())


class RememberArgs(Args):
    note: str = Field(
        description="One line worth recalling in later sessions: "
        "a project convention, a command, a pitfall found"
    )


class Remember(Tool):
    name = "remember"
    description = (
        f"Save one line to the workspace's {MEMORY_FILE}, recalled in every later session. "
        "Few and exact: conventions, commands, pitfalls; not progress notes. "
        "Asks the user like any edit."
    )
    args = RememberArgs
    read_only = False

    async def prepare(self, args: RememberArgs, ctx: ToolContext) -> Prepared:
        note = " ".join(args.note.split())
        if not note:
            raise ToolError("the note is empty")
        if len(note) > MAX_NOTE:
            raise ToolError(
                f"the note is {len(note)} characters; keep it to one line of at most {MAX_NOTE}"
            )
        path = ctx.paths.resolve(MEMORY_FILE)
        before = await _current(ctx, path)
        text = before.text if before is not None else ""
        for number, line in enumerate(text.splitlines(), 1):
            if _normal(line) == _normal(note):
                raise ToolError(
                    f"that note is already in {MEMORY_FILE} (line {number}); nothing to add"
                )
        body = text if text else HEADER
        after = body + ("" if body.endswith("\n") else "\n") + f"- {note}\n"
        if len(after) > MAX_MEMORY:
            raise ToolError(
                f"{MEMORY_FILE} is full ({len(text)} of {MAX_MEMORY} characters: "
                "memory is read into every session's context); "
                "ask the user to prune it or to keep this note somewhere else"
            )
        return _prepared(ctx, path, before, after)
