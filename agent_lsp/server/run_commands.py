"""The runs family: `agentLsp.run` (answered at once; the run streams), its sessions, models and
rewinds, a run's cancel (the command and the progress's cancel) and its approvals."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from agent_lsp.agent.loop.attach import AttachmentRefused
from agent_lsp.agent.loop.prompt_plan import PromptPlan
from agent_lsp.server.agent_server import AgentServer
from agent_lsp.server.rpc import safe_notify


async def run(ls: AgentServer, *args: Any) -> dict[str, Any]:
    from agent_lsp.server import commands
    from agent_lsp.server.folders import workspace_roots
    from agent_lsp.server.prompt_files import plan_run
    from agent_lsp.server.run_prompt import build_run_prompt, document_context

    parsed = commands.parse_args(commands.RunArgs, "agentLsp.run", args)
    # CONTRACT Decision 8: the first run sees the workspace's settings
    await ls.settings_ready()
    settings = ls.config.settings  # (each look at ls.config checks the user's file)

    async def resolve() -> tuple[str, PromptPlan | None]:
        # a `/name args` prompt runs that prompt file (Decision 34); titles keep it as typed
        expanded, plan = await plan_run(ls.runs.host, workspace_roots(ls), parsed, settings)
        return await build_run_prompt(ls, expanded), plan

    async def resolve_at_start() -> tuple[str, PromptPlan | None]:
        try:
            return await resolve()
        except commands.JsonRpcInvalidParams as exc:  # its file changed meanwhile
            raise AttachmentRefused(str(exc)) from None

    # A queued run's command file and document are read when it starts (Decision 49); a
    # document outside the workspace is a parameter error now (Decision 75).
    if parsed.queue and parsed.text_document is not None:
        await document_context(ls, parsed.text_document.uri, need_text=False)
    prompt, plan = (parsed.typed, None) if parsed.queue else await resolve()
    title = "Agent: " + parsed.typed.strip().splitlines()[0][:60]
    try:
        started = await ls.runs.start(
            prompt,
            title,
            parsed.session_id,
            settings,
            ls.caps,
            model=parsed.model,
            mode=parsed.mode,
            request=parsed.typed,
            plan=plan,
            queue=parsed.queue,
            resolve=resolve_at_start if parsed.queue else None,
            images=parsed.images,
            context=[c.attachment() for c in parsed.context or []],
        )
    except ValueError as exc:
        raise commands.JsonRpcInvalidParams(str(exc)) from None
    if started.state == "queued":  # its session's run runs: it starts when that one ends
        return {"runId": started.id, "sessionId": started.session.id, "queued": True}
    return {"runId": started.id, "sessionId": started.session.id}


async def sessions(ls: AgentServer, *args: Any) -> list[dict[str, Any]]:
    from agent_lsp.server import commands
    from agent_lsp.server.folders import workspace_roots

    commands.parse_args(commands.NoArgs, "agentLsp.sessions", args)
    store = ls.runs.host.store(workspace_roots(ls))
    return await asyncio.to_thread(store.list)


async def models(ls: AgentServer, *args: Any) -> dict[str, Any]:
    from agent_lsp.server import commands

    commands.parse_args(commands.NoArgs, "agentLsp.models", args)
    await ls.settings_ready()
    return await ls.runs.host.list_models(ls.config.settings)


async def rewind(ls: AgentServer, *args: Any) -> dict[str, Any]:
    from agent_lsp.server import commands
    from agent_lsp.server.folders import workspace_folders
    from agent_lsp.server.workspace import LspWorkspace

    parsed = commands.parse_args(commands.RewindArgs, "agentLsp.rewind", args)
    await ls.settings_ready()  # its transcript goes where the runs' go (transcriptDir)
    roots, names = workspace_folders(ls)
    try:
        result = await ls.runs.host.rewind(
            roots,
            LspWorkspace(ls, ls.caps, roots, names),
            parsed.run_id,
            force=parsed.force,
            include_later=parsed.include_later,
            binary_ok=False,
            settings=ls.config.settings,
        )
    except ValueError as exc:
        raise commands.JsonRpcInvalidParams(f"agentLsp.rewind: {exc}") from None
    # this command's own arguments
    return result.to_dict(force="`force: true`", include_later="`includeLater: true`")


def cancel(ls: AgentServer, *args: Any) -> bool:
    from agent_lsp.server import commands

    return ls.runs.cancel(commands.parse_args(commands.CancelArgs, "agentLsp.cancel", args).run_id)


def steer(ls: AgentServer, *args: Any) -> bool:
    from agent_lsp.server import commands

    parsed = commands.parse_args(commands.SteerArgs, "agentLsp.steer", args)
    return ls.runs.host.steer(parsed.run_id, parsed.text)


async def stop_process(ls: AgentServer, *args: Any) -> bool:
    """agentLsp.stopProcess {runId, processId} (Decision 86): true when it was running."""
    from agent_lsp.server import commands

    parsed = commands.parse_args(commands.StopProcessArgs, "agentLsp.stopProcess", args)
    return await ls.runs.host.stop_process(parsed.run_id, parsed.process_id)


def approve(ls: AgentServer, *args: Any) -> bool:
    from agent_lsp.server import commands

    parsed = commands.parse_args(commands.ApproveArgs, "agentLsp.approve", args)
    try:
        return ls.runs.approvals.answer(
            parsed.run_id, parsed.call_id, parsed.decision, parsed.reason, parsed.hunks
        )
    except ValueError as exc:  # hunks this approval does not offer
        raise commands.JsonRpcInvalidParams(f"agentLsp.approve: {exc}") from None


def show_approval(ls: AgentServer, *args: Any) -> bool:
    """The whole of what an approval would run or change, for clients whose menus cut it."""
    from agent_lsp.server import commands

    parsed = commands.parse_args(commands.ApprovalRef, "agentLsp.showApproval", args)
    pending = ls.runs.approvals.get(parsed.run_id, parsed.call_id)
    if pending is None:
        return False
    safe_notify(
        ls,
        types.WINDOW_SHOW_MESSAGE,
        types.ShowMessageParams(
            type=types.MessageType.Info,
            message=f"agent-lsp approval ({pending.request.tool}):\n{pending.request.detail}",
        ),
    )
    return True


def progress_cancel(ls: AgentServer, params: types.WorkDoneProgressCancelParams) -> None:
    ls.runs.cancel(str(params.token))


def register(server: AgentServer) -> None:
    server.command("agentLsp.run")(run)
    server.command("agentLsp.sessions")(sessions)
    server.command("agentLsp.models")(models)
    server.command("agentLsp.rewind")(rewind)
    server.command("agentLsp.cancel")(cancel)
    server.command("agentLsp.steer")(steer)
    server.command("agentLsp.stopProcess")(stop_process)
    server.command("agentLsp.approve")(approve)
    server.command("agentLsp.showApproval")(show_approval)
    server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)(progress_cancel)
