"""An answer validated against the output schema in a worker process with a time limit: a
`pattern` can backtrack for hours (`^(a+)+$`), and `re` holds the GIL and never looks at signals
meanwhile, so validating in the run's own process could not be stopped by a cancel or SIGTERM.
The worker is killed at the limit, or when the run is cancelled. Also the schema's depth limit:
jsonschema recurses per level, and a schema nested a few hundred levels deep ends in a
RecursionError.

This module is also the worker (`main`): it imports only the standard library and jsonschema."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

MAX_DEPTH = 64  # JSON nesting levels of a schema (objects and arrays); real ones use ~10
MAX_ERRORS = 10  # validation errors shown to the model (and in the stop's message)
ERROR_CHARS = 300  # one error's message at most
CHECK_SECONDS = 10.0  # a real answer validates in milliseconds
_ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding `agent_lsp`
_WORKER = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from agent_lsp.agent.loop.schema_check import main; main()"
)


class CheckTimedOut(Exception):
    """The worker did not finish within its limit (and was killed)."""


def nesting_over(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` nests objects/arrays deeper than `limit` (walked without recursion)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        node, depth = todo.pop()
        if not isinstance(node, dict | list):
            continue
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        todo.extend((child, depth + 1) for child in children)
    return False


# What can make a check run without end: a regex (`pattern`, `patternProperties`), a reference
# (a recursive `$ref` follows the answer's own depth), `uniqueItems` (quadratic on a long array
# of objects). A schema with none of them is checked in
# the run's process (each level of the check is one level of the schema, at most MAX_DEPTH).
_RISKY = frozenset(
    {"pattern", "patternProperties", "$ref", "$dynamicRef", "$recursiveRef", "uniqueItems"}
)


def needs_worker(schema: Any) -> bool:
    """Whether checking an answer against `schema` must run in a worker (see _RISKY); a key of
    that name anywhere counts, even as a property's name (then the worker is merely unneeded)."""
    todo = [schema]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            if _RISKY.intersection(node):
                return True
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
    return False


def validator_class(schema: dict[str, Any] | bool) -> Any:
    """The jsonschema validator class of the schema's `$schema` draft (default 2020-12); None
    for an unknown draft."""
    import jsonschema

    if isinstance(schema, dict) and "$schema" in schema:
        return jsonschema.validators.validator_for(schema, default=None)
    return jsonschema.Draft202012Validator


def errors_of(schema: dict[str, Any] | bool, instance: Any) -> list[str]:
    """What is wrong with `instance` under `schema` (at most MAX_ERRORS lines, and how many more);
    [] when it validates. Never fetches a `$ref`."""
    from referencing import Registry
    from referencing.exceptions import NoSuchResource

    def refuse(uri: str) -> Any:
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    registry = Registry(retrieve=refuse)  # type: ignore[call-arg]
    validator = validator_class(schema)(schema, registry=registry)
    try:
        errors = sorted(
            validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))
        )
    except RecursionError:
        return ["the answer nests too deep to be checked against the schema"]
    except Exception as exc:  # a $ref that cannot be resolved without fetching it
        return [f"the schema could not be applied: {exc}"]
    said = list(dict.fromkeys(f"{path_of(e.absolute_path)}: {clip(e.message)}" for e in errors))
    shown = said[:MAX_ERRORS]
    if len(said) > MAX_ERRORS:
        shown.append(f"... and {len(said) - MAX_ERRORS} more")
    return shown


async def check_in_worker(
    schema: dict[str, Any] | bool, instance: Any, limit: float = CHECK_SECONDS
) -> list[str]:
    """`errors_of` in a worker process; CheckTimedOut past `limit` seconds. A cancel kills the
    worker at once."""
    from agent_lsp.agent.exec.keyguard import child_env

    data = json.dumps({"schema": schema, "instance": instance}).encode()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _WORKER,
        _ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
    )
    try:
        async with asyncio.timeout(limit):
            out, err = await proc.communicate(data)
    except TimeoutError:
        raise CheckTimedOut(f"{limit:g} s") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    try:
        errors = json.loads(out)["errors"]
    except (ValueError, KeyError, TypeError):
        last = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return [f"the schema check failed (exit {proc.returncode}): {clip(last[0])}"]
    return [str(e) for e in errors]


def path_of(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def clip(text: str) -> str:
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def main() -> None:
    """The worker: `{schema, instance}` on stdin, `{errors}` on stdout."""
    request = json.loads(sys.stdin.buffer.read())
    errors = errors_of(request["schema"], request["instance"])
    sys.stdout.write(json.dumps({"errors": errors}))
    sys.stdout.flush()
