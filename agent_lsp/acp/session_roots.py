"""Requests that name no session: which workspaces have sessions (`session/list` without a cwd)
and `_agentLsp/rewind` of a run found in any of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp import RequestError

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.state.rewind import RunNotFinished
from agent_lsp.settings import state_dir


def stored_roots() -> list[Path]:
    """The workspace of each state folder holding sessions (every session index names it)."""
    roots: list[Path] = []
    base = state_dir() / "workspaces"
    try:
        folders = [p / "sessions" for p in base.iterdir() if (p / "sessions").is_dir()]
    except OSError:
        return roots
    for folder in folders:
        for index in sorted(folder.glob("*.json"))[:5]:  # the first readable one says it
            try:
                workspace = json.loads(index.read_text(encoding="utf-8")).get("workspace")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(workspace, str) and Path(workspace).is_dir():
                roots.append(Path(workspace))
            break
    return roots


def rewind_params(params: Any) -> tuple[str | None, bool, bool, str | None]:
    """`{sessionId?, runId?, force?, includeLater?}` checked: (runId, force, includeLater,
    sessionId); InvalidParams otherwise. Without runId, the session's last run."""
    if not isinstance(params, dict):
        raise RequestError(
            -32602,
            "_agentLsp/rewind: params must be an object {sessionId?, runId, force?, includeLater?}",
        )
    run_id, session_id = params.get("runId"), params.get("sessionId")
    force, later = params.get("force", False), params.get("includeLater", False)
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise RequestError(
            -32602, f"_agentLsp/rewind: runId must be a non-empty string, got {run_id!r}"
        )
    if session_id is not None and not isinstance(session_id, str):
        raise RequestError(
            -32602, f"_agentLsp/rewind: sessionId must be a string, got {session_id!r}"
        )
    if not isinstance(force, bool) or not isinstance(later, bool):
        raise RequestError(-32602, "_agentLsp/rewind: force and includeLater must be booleans")
    if run_id is None and session_id is None:
        raise RequestError(
            -32602, "_agentLsp/rewind: give runId (or sessionId, to rewind that session's last run)"
        )
    return run_id, force, later, session_id


async def rewind_anywhere(
    host: Any,
    roots: list[Path],
    run_id: str | None,
    force: bool,
    include_later: bool,
    settings: Any = None,
) -> dict[str, Any]:
    """A run of any known workspace, rewound on disk (no session: no editor to write through);
    its transcript goes where the settings' runs' transcripts go."""
    running: list[str] = []  # a workspace that knows the run but cannot rewind it yet says why
    for root in roots:
        try:
            result = await host.rewind(
                [root],
                DiskWorkspace([root]),
                run_id,
                force=force,
                include_later=include_later,
                binary_ok=True,
                settings=settings,
            )
        except RunNotFinished as exc:
            running.append(str(exc))
            continue
        except ValueError:
            continue
        # this method's own arguments
        return result.to_dict(force="`force: true`", include_later="`includeLater: true`")
    why = (
        running[0]
        if running
        else f"unknown runId {run_id!r} in the workspaces known here; pass sessionId"
    )
    raise RequestError(-32602, f"_agentLsp/rewind: {why}")
