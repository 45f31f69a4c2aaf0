"""agentLsp.run / agentLsp.cancel / agentLsp.approve: unpack, validate, call the registry."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pygls.exceptions import JsonRpcInvalidParams

from agent_lsp.settings import is_replay

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
    model: str | None = Field(None, min_length=1, max_length=200)
    mode: Literal["plan"] | None = None
    selection_in_prompt: bool = Field(False, alias="selectionInPrompt")  # our code actions' prompts hold it

    @field_validator("prompt")
    @classmethod
    def _not_blank(cls, prompt: str) -> str:
        if not prompt.strip():
            raise ValueError("the prompt is blank; say what the agent should do")
        return prompt

    @field_validator("model")
    @classmethod
    def _not_replay(cls, model: str | None) -> str | None:
        if model is not None and is_replay(model):
            raise ValueError("a replay: model can only come from your own settings, not from a run's arguments")
        return model


class CancelArgs(_Args):
    run_id: str = Field(alias="runId")


class ApproveArgs(_Args):
    run_id: str = Field(alias="runId")
    call_id: str = Field(alias="callId")
    decision: Literal["allow", "allowSession", "deny"]
    reason: str | None = Field(None, max_length=2000)


class ApprovalRef(_Args):
    run_id: str = Field(alias="runId")
    call_id: str = Field(alias="callId")


class RewindArgs(_Args):
    run_id: str = Field(alias="runId", min_length=1)
    force: bool = False
    include_later: bool = Field(False, alias="includeLater")


class NoArgs(_Args):
    pass


def parse_args(model: type[_Args], command: str, args: tuple[Any, ...]) -> Any:
    """One object argument, validated; a clear JSON-RPC InvalidParams error otherwise."""
    if model is NoArgs and not args:
        return NoArgs()
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
        "agentLsp.rewind": '{"runId": "r-..."}',
        "agentLsp.showApproval": '{"runId": "r-...", "callId": "call_..."}',
    }.get(command, "{}")


def compose_prompt(args: RunArgs, shown: str | None, selection: str | None) -> str:
    """The user's message: the prompt plus the file and the selected text it is about (added
    once: our own code actions already put it in the prompt)."""
    if args.text_document is None:
        return args.prompt
    parts = [args.prompt, f"\nFile: {shown or args.text_document.uri}"]
    if args.range is not None and selection and not args.selection_in_prompt:
        first, last = args.range.start.line, args.range.end.line
        parts.append(f"Selection (lines {first + 1}-{last + 1}):\n```\n{selection[:MAX_SELECTION]}\n```")
    return "\n".join(parts)
