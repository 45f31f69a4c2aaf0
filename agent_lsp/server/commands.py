"""agentLsp.run / agentLsp.cancel / agentLsp.approve: unpack, validate, call the registry."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pygls.exceptions import JsonRpcInvalidParams

from agent_lsp.agent.loop.attach import Attachment
from agent_lsp.server.wording import fenced
from agent_lsp.settings import is_replay

MAX_PROMPT = 1_000_000
MAX_IMAGES = 20
MAX_CONTEXT = 50
WHAT_TO_DO = (
    "give `prompt` (the task), or `question` with `textDocument` and `range` "
    "(a question about that selection), or `carryOutPlan: true` with the plan's `sessionId`"
)


def not_replay(model: str | None) -> str | None:
    if model is not None and is_replay(model):
        raise ValueError(
            "a replay: model can only come from your own settings, not from a command's arguments"
        )
    return model


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


class ContextRef(_Args):
    """A file or a selection the user attached (CONTRACT Decision 53)."""

    uri: str = Field(min_length=1, max_length=4096)
    range: Range | None = None

    @model_validator(mode="after")
    def _forward(self) -> ContextRef:
        if not self.uri.startswith("file:"):
            raise ValueError("`uri` must be a `file:` URI")
        if self.range is not None and (self.range.end.line, self.range.end.character) < (
            self.range.start.line,
            self.range.start.character,
        ):
            raise ValueError("`range` ends before it starts")
        return self

    def attachment(self) -> Attachment:
        if self.range is None:
            return Attachment(self.uri)
        start, end = self.range.start, self.range.end
        # a selection ending at a line's start does not take that line
        last = end.line if end.character == 0 and end.line > start.line else end.line + 1
        return Attachment(self.uri, (start.line + 1, max(start.line + 1, last)))


class RunArgs(_Args):
    """What a run is asked to do: exactly one of `prompt`, `question` (about the selection at
    `textDocument` + `range`; the server words the prompt) or `carryOutPlan` (CONTRACT
    Decision 47)."""

    prompt: str | None = Field(None, min_length=1, max_length=MAX_PROMPT)
    question: str | None = Field(None, min_length=1, max_length=MAX_PROMPT)
    carry_out_plan: StrictBool = Field(False, alias="carryOutPlan")
    text_document: DocumentRef | None = Field(None, alias="textDocument")
    range: Range | None = None
    session_id: str | None = Field(None, alias="sessionId")
    model: str | None = Field(None, min_length=1, max_length=200)
    mode: Literal["plan"] | None = None
    # our code actions' prompts hold it
    selection_in_prompt: bool = Field(False, alias="selectionInPrompt")
    # on a session whose run runs: start when it ends (CONTRACT Conversation, Decision 49)
    queue: StrictBool = False
    # sent with the prompt as data-URL parts, checked here (CONTRACT Decisions 54, 75)
    images: list[Any] | None = Field(None, max_length=MAX_IMAGES)
    context: list[ContextRef] | None = Field(None, max_length=MAX_CONTEXT)

    @field_validator("prompt", "question")
    @classmethod
    def _not_blank(cls, text: str | None) -> str | None:
        if text is not None and not text.strip():
            raise ValueError("it is blank; say what the agent should do")
        return text

    @field_validator("session_id")
    @classmethod
    def _session_id(cls, value: str | None) -> str | None:
        from agent_lsp.agent.state.sessions import check_session_id  # InvalidSessionId: -32602

        return None if value is None else check_session_id(value)

    @field_validator("images")
    @classmethod
    def _images(cls, images: list[Any] | None) -> list[Any] | None:
        from agent_lsp.agent.images import checked_image  # ImageRefused: a ValueError, -32602

        if images is None:
            return None
        parts = []
        for i, image in enumerate(images):
            if not isinstance(image, dict):
                raise ValueError(f"image {i + 1}: give {{mimeType, data}}")
            parts.append(checked_image(image.get("mimeType"), image.get("data"), i))
        return parts

    @model_validator(mode="after")
    def _one_request(self) -> RunArgs:
        given = [
            name
            for name, value in (
                ("prompt", self.prompt),
                ("question", self.question),
                ("carryOutPlan", self.carry_out_plan),
            )
            if value
        ]
        if not given:
            raise ValueError(f"nothing to do: {WHAT_TO_DO}")
        if len(given) > 1:
            raise ValueError(
                f"{' and '.join(f'`{name}`' for name in given)} were both given; {WHAT_TO_DO}"
            )
        if self.question is not None and (self.text_document is None or self.range is None):
            raise ValueError(
                "`question` asks about a selection: it needs `textDocument` and `range` "
                "(a question about no selection goes in `prompt`)"
            )
        if self.carry_out_plan and self.session_id is None:
            raise ValueError("`carryOutPlan` follows up a plan: it needs the plan's `sessionId`")
        if self.carry_out_plan and self.mode == "plan":
            raise ValueError(
                "`carryOutPlan` carries a plan out with every tool: "
                'it cannot go with `mode: "plan"`'
            )
        return self

    @property
    def typed(self) -> str:
        """What the user asked, as typed (the session title, the progress title, hooks)."""
        from agent_lsp.server.wording import CARRY_OUT_PLAN

        return self.prompt or self.question or CARRY_OUT_PLAN

    @field_validator("model")
    @classmethod
    def _not_replay(cls, model: str | None) -> str | None:
        return not_replay(model)


class CancelArgs(_Args):
    run_id: str = Field(alias="runId")


class StopProcessArgs(_Args):
    run_id: str = Field(alias="runId")
    process_id: str = Field(alias="processId", min_length=1, max_length=100)


class SteerArgs(_Args):
    run_id: str = Field(alias="runId")
    text: str = Field(min_length=1, max_length=MAX_PROMPT)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("it is blank; say what the agent should hear")
        return text


class ApproveArgs(_Args):
    run_id: str = Field(alias="runId")
    call_id: str = Field(alias="callId")
    decision: Literal["allow", "allowSession", "allowAlways", "deny"]
    reason: str | None = Field(None, max_length=2000)
    # Only these hunks of an edit (0-based, Decision 58); only with "allow"; [] is a denial.
    hunks: list[StrictInt] | None = Field(None, max_length=100_000)

    @model_validator(mode="after")
    def _hunks_only_allow(self) -> ApproveArgs:
        if self.hunks is not None and self.decision != "allow":
            raise ValueError('hunks go only with decision "allow"')
        return self


class ApprovalRef(_Args):
    run_id: str = Field(alias="runId")
    call_id: str = Field(alias="callId")


class RewindArgs(_Args):
    run_id: str = Field(alias="runId", min_length=1)
    force: bool = False
    include_later: bool = Field(False, alias="includeLater")


class NoArgs(_Args):
    pass


class HealthArgs(_Args):
    """`agentLsp.health {model?}`: `model` is the one the client's next runs use (picked in the
    client), checked instead of the setting's."""

    model: str | None = Field(None, min_length=1, max_length=200)

    @field_validator("model")
    @classmethod
    def _not_replay(cls, model: str | None) -> str | None:
        return not_replay(model)


def parse_args(model: type[_Args], command: str, args: tuple[Any, ...]) -> Any:
    """One object argument, validated; a clear JSON-RPC InvalidParams error otherwise."""
    if model is NoArgs and not args:
        return NoArgs()
    if len(args) != 1 or not isinstance(args[0], dict):
        raise JsonRpcInvalidParams(
            f"{command} takes exactly one object argument, e.g. {example(command)}"
        )
    try:
        return model.model_validate(args[0])
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'argument'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise JsonRpcInvalidParams(f"{command}: invalid argument: {problems}") from None


def example(command: str) -> str:
    return {
        "agentLsp.run": '{"prompt": "fix the failing test"}',
        "agentLsp.cancel": '{"runId": "r-..."}',
        "agentLsp.steer": '{"runId": "r-...", "text": "use the other file"}',
        "agentLsp.stopProcess": '{"runId": "r-...", "processId": "p1"}',
        "agentLsp.approve": '{"runId": "r-...", "callId": "call_...", "decision": "allow"}',
        "agentLsp.rewind": '{"runId": "r-..."}',
        "agentLsp.showApproval": '{"runId": "r-...", "callId": "call_..."}',
    }.get(command, "{}")


def compose_prompt(args: RunArgs, shown: str | None, selection: str | None) -> str:
    """The user's message of a `prompt` run: the prompt plus the file and the selected text it
    is about (added once: our own code actions already put it in the prompt)."""
    prompt = args.typed
    if args.text_document is None or (args.selection_in_prompt and args.range is not None):
        return prompt  # our code actions' prompts already quote the selection and name its file
    parts = [prompt, f"\nFile: {shown or args.text_document.uri}"]
    if args.range is not None and selection and not args.selection_in_prompt:
        first, last = args.range.start.line, args.range.end.line
        parts.append(f"Selection (lines {first + 1}-{last + 1}):\n{fenced(selection)}")
    return "\n".join(parts)
