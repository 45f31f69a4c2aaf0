"""A run's hooks put together: the declarations (hook_config), the environment they run in (the
workspace, `CLAUDE_PROJECT_DIR`, no API key) and, for project hooks with `sandbox.mode` on, the
sandbox with the run's transcript mounted read-only (Decision 31)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_lsp.agent.exec import sandbox
from agent_lsp.agent.policy.claude_files import ClaudeFile
from agent_lsp.agent.policy.hook_config import HookSpec, declared_hooks, never_consented
from agent_lsp.agent.policy.hook_exec import Confine, HookRefused
from agent_lsp.agent.policy.hooks import RunHooks
from agent_lsp.agent.ports import EventSink
from agent_lsp.agent.state.transcript import Transcript
from agent_lsp.agent.tools.runner import CommandRunner


def hook_env(runner: CommandRunner, root: Path) -> dict[str, str]:
    """A hook's environment: run_command's (the user's, without the key by name and by value),
    plus the project folder under both names."""
    return {**runner.env, "CLAUDE_PROJECT_DIR": str(root), "AGENT_LSP_PROJECT_DIR": str(root)}


def sandbox_confinement(runner: CommandRunner, transcript: Path) -> Confine:
    """Project hooks inside the command sandbox, as run_command is; the transcript readable."""

    async def confine(argv: list[str], cwd: Path) -> sandbox.Confined:
        problem = await sandbox.probe()
        if problem is not None:
            raise HookRefused(
                f"refused: project hooks run in the sandbox (sandbox.mode="
                f"{runner.settings.mode}) and {problem}. The hook did not run."
            )
        try:
            confined = await sandbox.confine(runner.policy(), argv, cwd)
        except sandbox.CannotHide as exc:
            raise HookRefused(f"refused: the sandbox cannot hide what it must ({exc})") from None
        except sandbox.SandboxUnavailable as exc:
            raise HookRefused(
                "refused: project hooks run in the sandbox without network (sandbox.network="
                f"false) and {exc}. The hook did not run."
            ) from None
        wrapped = confined.argv
        split = len(wrapped) - len(argv) - 1  # the `--` before the command
        confined.argv = [
            *wrapped[:split],
            "--ro-bind-try",
            str(transcript),
            str(transcript),
            *wrapped[split:],
        ]
        return confined

    return confine


async def load_run_hooks(
    settings_hooks: dict[str, Any],
    roots: list[Path],
    *,
    session_id: str,
    transcript: Transcript,
    env: dict[str, str],
    runner: CommandRunner,
    emit: EventSink,
    consented: Callable[[HookSpec], bool] | None = None,
    files: list[ClaudeFile] | None = None,
) -> tuple[RunHooks | None, list[str]]:
    """The run's hooks, or None when no hook may run at all (then nothing costs anything), and
    the problems of their declarations (each names its file). `files`: Claude Code's files as
    already read for the run's rules (None: read here)."""
    table = await asyncio.to_thread(
        declared_hooks,
        settings_hooks,
        roots,
        env=env,
        consented=consented or never_consented,
        files=files,
    )
    if not any(s.state == "active" for s in table.specs):
        return None, table.problems
    root = roots[0]
    hooks = RunHooks(
        table,
        session_id,
        str(transcript.path),
        root,
        hook_env(runner, root),
        emit,
        transcript,
        sandbox_confinement(runner, transcript.path) if runner.sandboxed else None,
        transcript.redact,
    )
    return hooks, table.problems
