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
from agent_lsp.agent.loop.schema_check import (
    MAX_DEPTH,
    CheckTimedOut,
    check_in_worker,
    errors_of,
    needs_worker,
    nesting_over,
    validator_class,
)
from agent_lsp.agent.loop.schema_check import clip as _clip
from agent_lsp.agent.loop.schema_check import path_of as _path
from agent_lsp.agent.loop.stops import LoopOutcome
from agent_lsp.agent.messages import StopCause
from agent_lsp.agent.state.session import Entry

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
    stuck: bool = False  # the check itself could not finish (its time limit): no repair turn

    @property
    def ok(self) -> bool:
        return not self.errors


class OutputSchema:
    """A JSON Schema the run's answer must fit; made only by `load_schema` (checked)."""

    def __init__(self, schema: dict[str, Any] | bool):
        self.schema = schema
        self._in_worker = needs_worker(schema)  # else checked here: ~0.3 s of worker start saved

    def prompt(self) -> str:
        return SCHEMA_PROMPT.format(schema=json.dumps(self.schema, ensure_ascii=False))

    async def check(self, text: str) -> Check:
        """The answer's JSON validated, in a worker process when the check could run without
        end (schema_check: a `pattern` may backtrack for hours); `stuck` when the worker hit its
        time limit."""
        found = find_json(text)
        if isinstance(found, Check):
            return found
        if not self._in_worker:
            errors = errors_of(self.schema, found)
            return Check(errors=tuple(errors)) if errors else Check(found)
        try:
            errors = await check_in_worker(self.schema, found)
        except CheckTimedOut as exc:
            return Check(
                errors=(
                    f"the answer could not be checked against the output schema within {exc} "
                    "(the check was stopped; a `pattern` of the schema that backtracks without "
                    "end, such as `^(a+)+$`, or `uniqueItems` over a long array of objects does "
                    "this)",
                ),
                stuck=True,
            )
        return Check(errors=tuple(errors)) if errors else Check(found)


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

    if not isinstance(schema, dict | bool):
        raise SchemaProblem(
            f"{name} is not a JSON Schema (an object or a boolean), got {type(schema).__name__}"
        )
    if nesting_over(schema):
        raise SchemaProblem(
            f"{name} nests deeper than {MAX_DEPTH} levels (objects and arrays); "
            "flatten it with $defs and $ref"
        )
    cls = validator_class(schema)
    if cls is None:
        raise SchemaProblem(
            f"{name}: unknown $schema {schema['$schema']!r} "  # type: ignore[index]
            "(known: drafts 3, 4, 6, 7, 2019-09, 2020-12)"
        )
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = _path(exc.absolute_path)
        raise SchemaProblem(
            f"{name} is not a valid JSON Schema: {where}: {_clip(exc.message)}"
        ) from None
    except RecursionError:
        raise SchemaProblem(f"{name} nests too deep to be checked") from None
    if isinstance(schema, dict):
        _refuse_remote_refs(schema, name)
    return OutputSchema(schema)


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
    except RecursionError:
        return Check(errors=("the answer's JSON nests too deep to be read",))
    except ValueError:
        pass
    blocks = JSON_BLOCK.findall(text)
    if blocks:
        try:
            return json.loads(blocks[-1])
        except RecursionError:
            return Check(errors=("the answer's JSON nests too deep to be read",))
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
        except (ValueError, RecursionError):
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
    check = await schema.check(redact(outcome.final_text))
    if check.ok:
        return outcome, check
    if check.stuck:  # the schema's fault, not the answer's: a repair turn would not help
        stuck = LoopOutcome(StopCause.SCHEMA, outcome.final_text, outcome.turns, check.errors[0])
        return stuck, None
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
    check = await schema.check(redact(outcome.final_text))
    if check.ok:
        return outcome, check
    why = (
        "the answer does not validate against the output schema (after one repair turn): "
        + "; ".join(check.errors)
    )
    return LoopOutcome(StopCause.SCHEMA, outcome.final_text, outcome.turns, why), None
