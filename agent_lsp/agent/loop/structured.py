"""`--output-schema` (CONTRACT "Headless at scale", Decision 41): the schema loaded and checked
before a run, the JSON found in the model's answer, its validation, and the one repair turn.

The JSON is the whole answer, else its last ```json block, else its last balanced {…}/[…]. The
schema's own `$schema` draft (default 2020-12) validates it, with the `jsonschema` library
(imported only when a schema is given); a `$ref` is never fetched."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

from agent_lsp.agent.display import clip
from agent_lsp.agent.events import StatusEvent
from agent_lsp.agent.loop.loop import AgentLoop
from agent_lsp.agent.loop.stops import LoopOutcome
from agent_lsp.agent.messages import StopCause
from agent_lsp.agent.state.session import Entry

MAX_ERRORS = 10  # validation errors shown to the model (and in the stop's message)
ERROR_CHARS = 300  # one error's message at most
STATUS_CHARS = 120  # the error the repair's status line quotes
JSON_BLOCK = re.compile(r"```json[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)

SCHEMA_PROMPT = (
    "\n\n## Answer format\n"
    "The user needs a machine-readable answer. End your final reply with one JSON value that "
    "validates against this JSON Schema, in a ```json block (nothing after the block):\n"
    "{schema}"
)

REPAIR_PROMPT = """Your answer's JSON does not validate against the required JSON Schema:
{errors}
Reply again with the corrected JSON answer in a ```json block."""


class SchemaProblem(ValueError):
    """The schema file cannot be used: unreadable, not JSON, not a valid schema, or a `$ref`
    that would have to be fetched."""


@dataclass(frozen=True)
class Check:
    """An answer checked: its JSON (when found and valid) or why not."""

    value: Any = None
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors


class OutputSchema:
    """A JSON Schema the run's answer must fit; made only by `load_schema` (checked)."""

    def __init__(self, schema: dict[str, Any] | bool, validator: Any):
        self.schema = schema
        self._validator = validator

    def prompt(self) -> str:
        return SCHEMA_PROMPT.format(schema=json.dumps(self.schema, ensure_ascii=False))

    def check(self, text: str) -> Check:
        found = find_json(text)
        if isinstance(found, Check):
            return found
        try:
            errors = sorted(
                self._validator.iter_errors(found), key=lambda e: list(map(str, e.absolute_path))
            )
        except Exception as exc:  # a $ref that cannot be resolved without fetching it
            return Check(errors=(f"the schema could not be applied: {exc}",))
        if not errors:
            return Check(found)
        said = list(dict.fromkeys(f"{_path(e.absolute_path)}: {_clip(e.message)}" for e in errors))
        shown = said[:MAX_ERRORS]
        if len(said) > MAX_ERRORS:
            shown.append(f"... and {len(said) - MAX_ERRORS} more")
        return Check(errors=tuple(shown))


def load_schema(path: Path) -> OutputSchema:
    """The schema of `path`, checked against its draft's metaschema; SchemaProblem says why not."""
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SchemaProblem(f"cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise SchemaProblem(
            f"{path} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    return make_schema(schema, str(path))


def make_schema(schema: Any, name: str = "the schema") -> OutputSchema:
    import jsonschema
    from referencing import Registry
    from referencing.exceptions import NoSuchResource

    if not isinstance(schema, dict | bool):
        raise SchemaProblem(
            f"{name} is not a JSON Schema (an object or a boolean), got {type(schema).__name__}"
        )
    if isinstance(schema, dict) and "$schema" in schema:
        cls = jsonschema.validators.validator_for(schema, default=None)
        if cls is None:
            raise SchemaProblem(
                f"{name}: unknown $schema {schema['$schema']!r} "
                "(known: drafts 3, 4, 6, 7, 2019-09, 2020-12)"
            )
    else:
        cls = jsonschema.Draft202012Validator
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = _path(exc.absolute_path)
        raise SchemaProblem(
            f"{name} is not a valid JSON Schema: {where}: {_clip(exc.message)}"
        ) from None
    if isinstance(schema, dict):
        _refuse_remote_refs(schema, name)

    def refuse(uri: str) -> Any:  # never fetched, whatever slipped past the check above
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    return OutputSchema(schema, cls(schema, registry=Registry(retrieve=refuse)))  # type: ignore[call-arg]


def _refuse_remote_refs(schema: dict[str, Any], name: str) -> None:
    """Every `$ref` must point into the schema itself (a `#…` pointer or an `$id` it declares)
    or at a draft's metaschema (bundled with jsonschema): nothing is ever fetched."""
    from jsonschema_specifications import REGISTRY

    ids: set[str] = set()
    refs: list[str] = []

    def walk(node: Any, base: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$id"), str):
                base = urldefrag(urljoin(base, node["$id"])).url
                ids.add(base)
            for key in ("$ref", "$dynamicRef", "$recursiveRef"):
                if isinstance(node.get(key), str):
                    refs.append(urldefrag(urljoin(base, node[key])).url)
            for key, value in node.items():
                if key not in ("enum", "const", "examples", "default"):  # values, not schemas
                    walk(value, base)
        elif isinstance(node, list):
            for item in node:
                walk(item, base)

    root = str(schema.get("$id", "")) if isinstance(schema.get("$id"), str) else ""
    walk(schema, "")
    known = ids | {"", urldefrag(root).url}
    for target in refs:
        if target in known:
            continue
        try:
            REGISTRY.contents(target)  # a draft's metaschema: bundled, not fetched
            continue
        except Exception:
            pass
        raise SchemaProblem(
            f"{name}: $ref {target!r} points outside the schema; remote references are never "
            "fetched (put the definition under $defs)"
        )


def find_json(text: str) -> Any:
    """The answer's JSON (Decision 41), or a Check saying why there is none."""
    whole = text.strip()
    try:
        return json.loads(whole)
    except ValueError:
        pass
    blocks = JSON_BLOCK.findall(text)
    if blocks:
        try:
            return json.loads(blocks[-1])
        except json.JSONDecodeError as exc:
            return Check(
                errors=(
                    f"the last ```json block is not valid JSON ({exc.msg} at line {exc.lineno} "
                    f"column {exc.colno})",
                )
            )
    for start, end in reversed(_balanced_spans(text)):
        try:
            return json.loads(text[start:end])
        except ValueError:
            continue
    return Check(errors=("the answer holds no JSON value (expected a ```json block at its end)",))


def _balanced_spans(text: str) -> list[tuple[int, int]]:
    """The outermost balanced {…} and […] spans of `text`, in order (strings inside them kept
    whole, so a brace in a string does not count)."""
    spans: list[tuple[int, int]] = []
    stack: list[str] = []
    start = 0
    in_string = escaped = False
    closing = {"}": "{", "]": "["}
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch in "{[":
            if not stack:
                start = i
            stack.append(ch)
        elif ch in closing and stack:
            if stack[-1] != closing[ch]:  # mismatched: what was open is not a JSON value
                stack.clear()
                continue
            stack.pop()
            if not stack:
                spans.append((start, i + 1))
        elif ch == '"' and stack:
            in_string = True
    return spans


async def answer_in_schema(
    main: AgentLoop, outcome: LoopOutcome, schema: OutputSchema, redact: Callable[[str], str]
) -> tuple[LoopOutcome, Check | None]:
    """The loop's answer checked against the schema (as the report will show it: redacted); an
    invalid one gets ONE more turn with the errors (it counts against maxTurns, the loop's own
    budget); still invalid, the run stops `fatal` / `schema` saying why. The Check is returned
    when the answer validated."""
    if outcome.cause != StopCause.ANSWER:
        return outcome, None
    check = schema.check(redact(outcome.final_text))
    if check.ok:
        return outcome, check
    await main.log_pending()  # the answer is in the transcript before the repair's request
    # Said before the repair's text streams: its answer is a new one, not more of the first.
    main.emit(
        StatusEvent(
            f"the answer does not fit the output schema ({clip(check.errors[0], STATUS_CHARS)}): "
            "asking the model once more for an answer that does",
            main.turn,
            agent_id=main.agent_id,
        )
    )
    errors = "\n".join(f"- {e}" for e in check.errors)
    main.append(
        Entry({"role": "user", "content": REPAIR_PROMPT.format(errors=errors)}, "note", main.run_id)
    )
    outcome = await main.loop()
    if outcome.cause != StopCause.ANSWER:
        return outcome, None
    check = schema.check(redact(outcome.final_text))
    if check.ok:
        return outcome, check
    why = (
        "the answer does not validate against the output schema (after one repair turn): "
        + "; ".join(check.errors)
    )
    return LoopOutcome(StopCause.SCHEMA, outcome.final_text, outcome.turns, why), None


def _path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _clip(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"
