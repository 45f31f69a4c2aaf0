"""How run_command starts processes for one run: the reaper or the bubblewrap sandbox around
them, an environment without the model's key, and every process ended with the run."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from agent_lsp.agent.exec import sandbox
from agent_lsp.agent.exec.keyguard import child_env
from agent_lsp.agent.exec.process import (
    CommandNotStarted,
    ProcessResult,
    end_process,
    reaped,
    run_process,
)
from agent_lsp.agent.exec.program_path import find_program
from agent_lsp.agent.ports import current_tool_span
from agent_lsp.agent.tools.errors import ToolError
from agent_lsp.settings import SandboxSettings


class CommandRunner:
    def __init__(
        self,
        *,
        env: dict[str, str],
        secret_names: list[str],
        secrets: list[str],
        sandbox: SandboxSettings,
        roots: list[Path],
        hidden: list[Path],
    ):
        self.env = child_env(env, names=secret_names, extra_secrets=secrets)
        self.settings = sandbox
        self.roots = roots
        self.hidden = hidden
        self.processes: set[asyncio.subprocess.Process] = set()

    @property
    def sandboxed(self) -> bool:
        return self.settings.mode != "off"

    def policy(self) -> sandbox.SandboxPolicy:
        hide = self.settings.hide if self.settings.hide is not None else list(sandbox.DEFAULT_HIDE)
        return sandbox.SandboxPolicy(
            self.settings.mode,
            self.settings.network,
            tuple(self.roots),
            sandbox.expand_hidden(hide, self.hidden, self.env),
            runtime=sandbox.runtime_dirs(self.env),
            sockets=sandbox.host_sockets(self.env),
        )

    def describe(self) -> str:
        return self.policy().describe() if self.sandboxed else ""

    async def wrap(
        self,
        argv: list[str],
        cwd: Path,
        what: str = "run_command",
        tools: tuple[Path, ...] = (),
    ) -> tuple[sandbox.Confined, sandbox.SandboxPolicy | None]:
        """argv inside the sandbox (with its policy) or under the reaper. ToolError when it
        cannot start; with the sandbox on and unavailable, nothing runs at all."""
        if not self.sandboxed:
            return sandbox.Confined(reaped(argv)), None
        problem = await sandbox.probe()
        if problem is not None:
            raise ToolError(
                f"refused: {what} is set to run in a sandbox "
                f"(sandbox.mode={self.settings.mode}) and {problem}. Nothing ran."
            )
        policy = replace(self.policy(), tools=tools)
        if "/" not in argv[0]:  # bwrap would search PATH itself, empty entries included
            program = find_program(argv[0], self.env.get("PATH", ""))
            if program is None:
                raise ToolError(
                    f"cannot start {argv[0]!r}: no such command on the PATH "
                    "(agent-lsp looks only in its absolute entries). Nothing ran."
                )
            argv = [program, *argv[1:]]
        try:
            return await sandbox.confine(policy, argv, cwd), policy
        except sandbox.CannotHide as exc:
            raise ToolError(
                f"refused: the sandbox cannot hide what it must ({exc}). Nothing ran."
            ) from None
        except sandbox.SandboxUnavailable as exc:
            raise ToolError(
                f"refused: {what} is set to run in a sandbox without network "
                f"(sandbox.mode={self.settings.mode}, sandbox.network=false) and {exc}. "
                "Nothing ran."
            ) from None

    async def run(
        self, argv: list[str], cwd: Path, timeout: float
    ) -> tuple[ProcessResult, str | None]:
        """(result, a note when the sandbox blocked something). ToolError when it cannot start;
        with the sandbox on and unavailable, nothing runs at all."""
        confined, policy = await self.wrap(argv, cwd)
        try:
            result = await run_process(
                confined, cwd, timeout, env=self.child_env(), processes=self.processes
            )
        except CommandNotStarted as exc:
            raise ToolError(str(exc)) from None
        finally:
            confined.close()
        failure = (
            sandbox.setup_failure(result.output)
            if policy is not None and result.code == 1
            else None
        )
        if failure is not None:
            raise ToolError(f"refused: the sandbox could not be set up ({failure}). Nothing ran.")
        note = (
            sandbox.explain_blocked(result.output, policy)
            if policy is not None and result.code != 0
            else None
        )
        return result, note

    def child_env(self) -> dict[str, str]:
        """The command's environment: with telemetry on, `TRACEPARENT` names its tool call's
        span."""
        span = current_tool_span.get()
        traceparent = span.traceparent() if span is not None else None
        return {**self.env, "TRACEPARENT": traceparent} if traceparent else self.env

    async def stop_all(self) -> None:
        procs = list(self.processes)
        if procs:
            await asyncio.gather(*(end_process(p) for p in procs), return_exceptions=True)
