"""A tool call in one line, for the stream and the progress (`run_command pytest -x`)."""

from __future__ import annotations

from typing import Any

from agent_lsp.agent.display import clip, escape_invisible
from agent_lsp.agent.messages import ToolCall, parse_arguments


def describe_call(call: ToolCall) -> str:
    """`edit_file calc.py`, `run_command pytest -x`: the call in a line (progress, terminal)."""
    args = arguments_of(call)
    if isinstance(args, dict):
        main = next(
            (
                args[k]
                for k in ("path", "command", "pattern", "task", "note")
                if isinstance(args.get(k), str)
            ),
            None,
        )
        if main is not None:
            return (
                f"{call.name} "
                f"{clip(escape_invisible(' '.join(main.split()), keep_newlines=False), 160)}"
            )
    return f"{call.name} {clip(escape_invisible(call.arguments[:400], keep_newlines=False), 160)}"


def arguments_of(call: ToolCall) -> Any:
    try:
        return parse_arguments(call)
    except ValueError:
        return call.arguments
