"""agentLsp.run / agentLsp.cancel / agentLsp.approve: unpack, validate, call the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pygls.exceptions import JsonRpcInvalidParams

from agent_lsp.server.workspace import uri_to_path

MAX_PROMPT = 1_000_000
MAX_SELECTION = 50_000


class _Args(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Position(_Args):
    line: int = Field(ge=0)
    character: int = Field(ge=0)


class Range(_Args):
    start: Position
    end: Position


class DocumentRef(_Args):
    uri: str = Field(min_length=1)


class RunArgs(_Args):
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT)
    text_document: DocumentRef | None = Field(None, alias="textDocument")
    range: Range | None = None
    session_id: str | None = Field(None, alias="sessionId")

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, prompt: str) -> str:
        if not prompt.strip():
            raise ValueError("the prompt is blank; say what the agent should do")
        return prompt


class CancelArgs(_Args):
    run_id: str = Field(alias="runId")


class ApproveArgs(_Args):
    run_id: str = Field(alias="runId")
    call_id: str = Field(alias="callId")
    decision: Literal["allow", "allowSession", "deny"]


def parse_args(model: type[_Args], command: str, args: tuple[Any, ...]) -> Any:
    """One object argument, validated; a clear JSON-RPC InvalidParams error otherwise."""
    if len(args) != 1 or not isinstance(args[0], dict):
        raise JsonRpcInvalidParams(f"{command} takes exactly one object argument, e.g. {example(command)}")
    try:
        return model.model_validate(args[0])
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'argument'}: {e['msg']}" for e in exc.errors()[:5])
        raise JsonRpcInvalidParams(f"{command}: invalid argument: {problems}") from None


def example(command: str) -> str:
    return {
        "agentLsp.run": '{"prompt": "fix the failing test"}',
        "agentLsp.cancel": '{"runId": "r-..."}',
        "agentLsp.approve": '{"runId": "r-...", "callId": "call_...", "decision": "allow"}',
    }.get(command, "{}")


def compose_prompt(args: RunArgs, text: str | None, roots: list[Path]) -> str:
    """The user's message: the prompt plus the file and the selected text it is about."""
    if args.text_document is None:
        return args.prompt
    path = uri_to_path(args.text_document.uri)
    shown = str(path) if path else args.text_document.uri  # e.g. an `untitled:` buffer
    for root in roots:
        if path and path.is_relative_to(root):
            shown = path.relative_to(root).as_posix()
            break
    parts = [args.prompt, f"\nFile: {shown}"]
    if args.range is not None and text is not None:
        lines = text.splitlines()
        first, last = args.range.start.line, args.range.end.line
        if args.range.end.character == 0 and last > first:
            last -= 1
        chosen = "\n".join(lines[first : last + 1])[:MAX_SELECTION]
        if chosen and chosen not in args.prompt:
            parts.append(f"Selection (lines {first + 1}-{last + 1}):\n```\n{chosen}\n```")
    return "\n".join(parts)
