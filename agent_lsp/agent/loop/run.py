"""One run of the agent on a session: the loop wired to its host's ports, ended by a report."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from agent_lsp.agent.events import Event, StatusEvent, TextDelta, ThinkingDelta, redacted
from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.exec.process import kill_group
from agent_lsp.agent.images import user_content
from agent_lsp.agent.loop.budget import Budget
from agent_lsp.agent.loop.loop import AgentLoop
from agent_lsp.agent.loop.memory import recall_memory
from agent_lsp.agent.loop.report import close_run
from agent_lsp.agent.loop.run_state import RunOptions, RunState
from agent_lsp.agent.loop.services import ApprovalGate, Limits, LoopTools, RunSeams, RunStats, Spill
from agent_lsp.agent.loop.stops import LoopOutcome
from agent_lsp.agent.loop.structured import answer_in_schema
from agent_lsp.agent.messages import RunReport, StopCause, Structured
from agent_lsp.agent.model.client import Model, ModelError, make_model
from agent_lsp.agent.policy.approval import ApprovalPolicy, permission_rules
from agent_lsp.agent.policy.hook_setup import load_run_hooks
from agent_lsp.agent.policy.hooks import HookStopped, RunHooks
from agent_lsp.agent.ports import (
    Approver,
    EventSink,
    NoTelemetry,
    RunPermissions,
    Workspace,
    answers_diagnostics,
    folder_names,
)
from agent_lsp.agent.state.checkpoints import RunCheckpoint
from agent_lsp.agent.state.session import Entry, RunRecord, Session, new_id
from agent_lsp.agent.state.transcript import Redactor, Transcript
from agent_lsp.agent.tools.base import Tool, ToolBox, ToolContext
from agent_lsp.agent.tools.codeintel.offered import CODE_INTEL_PROMPT
from agent_lsp.agent.tools.codeintel.sources import CodeIntel
from agent_lsp.agent.tools.debug import DEBUG_PROMPT
from agent_lsp.agent.tools.debugger.sources import debugpy_dir
from agent_lsp.agent.tools.paths import PathGuard
from agent_lsp.agent.tools.runner import CommandRunner
from agent_lsp.agent.tools.skill import skills_block
from agent_lsp.agent.tools.toolsets import main_tools, plan_tools
from agent_lsp.agent.wellformed import wellformed
from agent_lsp.settings import Settings, state_dir

log = logging.getLogger(__name__)

__all__ = ["RunOptions", "Session", "new_id", "run_task"]

SYSTEM_PROMPT = (
    "You are agent-lsp, a coding agent working inside the user's editor.\n"
    "Workspace folders: {roots}. Paths are relative to the first folder (other folders by their "
    "name as prefix).\n"
    "Work in small verified steps: look (read_file, list_files, search) before you change "
    "anything; change files only with edit_file/write_file (the editor applies them); run tests or "
    "commands with run_command. Every side effect may need the user's approval: a denial is an "
    "answer, not an error - do not repeat a denied call, take another route or ask.\n"
    "Use delegate for big read-only investigations with a clear result. When the task is done, "
    "stop calling tools and reply with a short summary of what you changed and anything left to "
    "do.{memory}"
)

PLAN_PROMPT = (
    "\n\n## Plan mode\n"
    "The user asked for a plan first. Look around with the read-only tools, change nothing, and "
    "reply with a numbered plan of concrete steps (files, functions, commands to verify). The user "
    "will then ask you to carry it out."
)


async def run_task(
    prompt: str,
    *,
    session: Session,
    settings: Settings,
    workspace: Workspace,
    approver: Approver,
    emit: EventSink,
    run_id: str | None = None,
    model: Model | None = None,
    env: dict[str, str] | None = None,
    options: RunOptions | None = None,
) -> RunReport:
    """Run the agent on one user message. Always returns a report, whatever happens."""
    prompt = wellformed(prompt)  # a client's `\\ud800`, argv's undecodable bytes
    options = options or RunOptions()
    run_id = run_id or options.run_id or new_id("r")
    model = model or options.model
    env = (
        env
        if env is not None
        else options.env
        if options.env is not None
        else keyguard.environment()
    )
    redact = Redactor(keyguard.secrets(env, [settings.api_key_env]))
    transcript = Transcript(settings.transcript_path() / f"{run_id}.jsonl", run_id, redact)
    paths = PathGuard(
        workspace.roots, folder_names(workspace), extra_readable=session.spill_files
    )
    runner = CommandRunner(
        env=env,
        secret_names=keyguard.key_names(settings.api_key_env),
        secrets=redact.secrets,
        sandbox=settings.sandbox,
        roots=paths.roots,
        hidden=[state_dir(), settings.transcript_path()],
    )
    record = RunRecord(run_id, str(transcript.path), time.time(), prompt)
    # The tools write into the record's own changes: the report, the session index and the
    # session's edited files all read that one record.
    tool_ctx = ToolContext(workspace=workspace, paths=paths, changes=record.changes, runner=runner)
    if options.checkpoints is not None:
        tool_ctx.checkpoint = RunCheckpoint(options.checkpoints, workspace, run_id, session.id)
    tool_ctx.code_intel = _code_intel(options, session, paths.roots)
    stats = RunStats()
    # A command's own model is this run's only (Decision 34); `model` is the session's.
    model_name = options.model_name or session.model
    pricing = settings.pricing.get(model_name or settings.model)
    granted = options.permissions or RunPermissions()
    policy = ApprovalPolicy(
        settings.approval,
        session.approvals,
        permission_rules(settings, granted.rules),
        roots=paths.roots,
        can_save_always=granted.save_always is not None,
    )
    tool_ctx.hidden = policy.hides if policy.read_denials() else None
    gate = ApprovalGate(policy, approver, settings.approval.timeout, granted.save_always)
    # A result cut to fit names its spill file, which the session's read_file may then read.
    spill = Spill(
        state_dir() / "spill" / run_id, settings.tool_output_limit, session.add_spill_file
    )
    seams = RunSeams(
        run_id,
        model,  # type: ignore[arg-type]  # made below, before the first model call, when None
        _redacting(emit, redact),
        transcript,
        redact,
        session.estimator,
        Limits(settings.context_window, settings.tool_output_limit, settings.request_timeout),
        stats,
        gate,
        spill,
        pricing,
        # this run's record is in session.runs
        changed_files=lambda: [paths.display(p) for p in session.edited],
        telemetry=options.telemetry or NoTelemetry(),
        budget=Budget(settings.budget.max_cost_usd),
    )
    main: AgentLoop | None = None
    # A tool's own status line (an edit applied late in the editor's preview) carries the turn
    # the main loop is in (or ended in), like every other status line.
    tool_ctx.notify = lambda text: seams.emit(
        StatusEvent(text, main.turn if main is not None else 0)
    )
    run = RunState(seams, tool_ctx, session, settings, paths, record)
    tool_ctx.spawn_subagent = run.spawn_subagent
    tool_ctx.prompt_files = options.prompt_files
    tool_ctx.allow_read = session.add_spill_file
    for path in options.readable:  # the files of a skill run as a /command
        session.add_spill_file(path)
    session.running = run_id
    session.runs.append(record)
    session.title = session.title or " ".join((options.title or prompt).split())
    prompt_entry = Entry(
        {"role": "user", "content": user_content(prompt, options.images)}, "prompt", run_id
    )
    session.history.append(prompt_entry)
    try:
        try:
            if options.on_record is not None:
                await options.on_record(session, record)
            if seams.model is None:
                seams.model = make_model(settings, env, model_name)
            seams.hooks, problems = await load_run_hooks(
                settings.hooks,
                paths.roots,
                session_id=session.id,
                transcript=transcript,
                env=env,
                runner=runner,
                emit=seams.emit,
                consented=options.hook_consent or granted.hook_consent,
                files=granted.claude_files,
            )
            for problem in problems:  # a malformed declaration is named, never skipped silently
                seams.emit(StatusEvent(f"hooks: {problem}", 0))  # before turn 1
            memory = await recall_memory(paths.roots, settings.memory_files)
            memory_text = redact(
                "".join(f"\n\n## Memory: {label}\n{text}" for label, text in memory)
            )
            tools, withheld, system = _offer(
                options, settings, policy, tool_ctx, workspace, paths, memory_text
            )
            run.parent_tools = tools  # what a user's agent's tools may narrow (Decision 35)
            main = AgentLoop(
                seams,
                "main",
                LoopTools(ToolBox(tools, withheld), tool_ctx),
                settings.max_turns,
                session.history,
                system,
            )
            await transcript.write(
                "main",
                0,
                "start",
                prompt=prompt,
                sessionId=session.id,
                model=seams.model.name,
                mode=options.mode or "default",
                memory=[label for label, _ in memory],
            )
            if warning := seams.limits.schema_warning(main.schema_tokens):
                seams.emit(StatusEvent(warning, 0))  # before turn 1: why results may be cut
            if seams.hooks is not None:
                await session_hooks(seams.hooks, session, options.title or prompt, run_id)
            outcome = await main.loop()
            if options.output_schema is not None:
                outcome, check = await answer_in_schema(
                    main, outcome, options.output_schema, redact
                )
                run.structured = Structured(check.value) if check is not None else None
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            cancel = options.cancelled_by() if options.cancelled_by is not None else None
            outcome = LoopOutcome(
                cancel.cause if cancel is not None else StopCause.USER,
                main.last_text if main else "",
                main.turn if main else 0,
                note=cancel.by if cancel else None,
            )
        except HookStopped as exc:  # a prompt refused, or `continue: false` before the loop
            if prompt_entry in session.history:  # a refused prompt is not the conversation's
                session.history.remove(prompt_entry)
            outcome = LoopOutcome(StopCause.HOOK, "", main.turn if main else 0, str(exc))
        except ModelError as exc:  # no model client could be made (no key, a bad endpoint)
            outcome = LoopOutcome(StopCause.MODEL, "", 0, str(exc))
        except Exception as exc:  # the loop must explain every stop, even a bug of ours
            log.exception("run %s failed", run_id)
            outcome = LoopOutcome(
                StopCause.INTERNAL,
                main.last_text if main else "",
                main.turn if main else 0,
                f"internal error: {type(exc).__name__}: {exc}",
            )
    except BaseException:  # the process is going down (KeyboardInterrupt, SystemExit)
        for proc in list(tool_ctx.processes):
            kill_group(proc)
        session.running = None
        raise
    # The stop is decided, and the first cause fixes it (Decision 73): from here on a cancel
    # (a second Stop while a Notification hook settles) must not lose the report, the
    # transcript's stop line, the stop event or the progress's end; it only cuts the hooks'
    # grace short.
    if options.images and outcome.cause == StopCause.MODEL:
        _forget_unanswered(session, prompt_entry)
    hooks = seams.hooks
    return await _uncancellable(
        _end_run(run, main, outcome, runner, owns_model=model is None, options=options),
        hurry=hooks.hurry if hooks is not None else None,
    )


async def _end_run(
    run: RunState,
    main: AgentLoop | None,
    outcome: LoopOutcome,
    runner: CommandRunner,
    *,
    owns_model: bool,
    options: RunOptions,
) -> RunReport:
    """What every run does once at its end: its processes ended, its background hooks settled,
    then the report written, saved and sent (close_run)."""
    try:
        for proc in list(run.tool_ctx.processes):  # e.g. an rg a cancel interrupted
            kill_group(proc)
        if run.tool_ctx.debugger is not None:  # the debug session ends with the run
            try:
                await run.tool_ctx.debugger.stop()
            except Exception:  # runner.stop_all below still ends its processes
                log.exception("run %s: ending the debug session failed", run.seams.run_id)
        await runner.stop_all()
        hooks = run.seams.hooks
        if hooks is not None:
            await hooks.settle()
            for proc in list(hooks.processes):
                kill_group(proc)
            run.session.end_hooks = hooks.session_end
    except Exception:  # the report must still be written and sent
        log.exception("ending run %s failed", run.seams.run_id)
    finally:
        run.session.running = None
    return await close_run(run, main, outcome, owns_model=owns_model, options=options)


def _offer(
    options: RunOptions,
    settings: Settings,
    policy: ApprovalPolicy,
    tool_ctx: ToolContext,
    workspace: Workspace,
    paths: PathGuard,
    memory_text: str,
) -> tuple[list[Tool], list[Tool], str]:
    """What the main agent is offered: its tools, those a bare deny withholds (Decision 28)
    apart, and its system prompt."""
    steer = CODE_INTEL_PROMPT if tool_ctx.code_intel is not None else ""
    debugging = options.mode != "plan" and debugpy_dir() is not None
    found = options.prompt_files
    skills = found.skills if found is not None else {}
    diagnostics = answers_diagnostics(workspace)
    code_intel = tool_ctx.code_intel is not None
    agents = found.agents if found is not None else None
    tools = (
        plan_tools(options.extra_tools, diagnostics, code_intel, skills=bool(skills), agents=agents)
        if options.mode == "plan"
        else main_tools(
            options.extra_tools,
            diagnostics,
            code_intel,
            skills=bool(skills),
            agents=agents,
            debug=settings.debug if debugging else None,
        )
    )
    withheld = [t for t in tools if not policy.offers(t)]  # a bare deny (Decision 28)
    tools = [t for t in tools if policy.offers(t)]
    # the debugger's advice only where the model has it (a bare `Debug` deny takes it off)
    steer += DEBUG_PROMPT if any(t.name == "debug_start" for t in tools) else ""
    # The skills block sits before the memory: it changes less often (prompt cache).
    system = SYSTEM_PROMPT.format(
        roots=", ".join(paths.names()),
        memory=steer + skills_block(skills) + memory_text,
    )
    if options.mode == "plan":
        system += PLAN_PROMPT
    if options.output_schema is not None:
        system += options.output_schema.prompt()
    return tools, withheld, system


def _code_intel(options: RunOptions, session: Session, roots: list[Path]) -> CodeIntel | None:
    """The run's language-server sources when the session offers the code-intel tools: offered
    when its first run had a source, and from then on for the whole session (Decision 39), even
    when a later run has none (the tools then say no language server answers)."""
    sources = []
    if options.code_intel is not None:
        try:
            sources = list(options.code_intel(roots))
        except Exception:  # a failing source costs its answers only
            log.warning("the code-intel sources are unavailable for this run", exc_info=True)
    if session.code_intel is None:
        session.code_intel = bool(sources)
    return CodeIntel(sources, session.add_spill_file) if session.code_intel else None


async def session_hooks(hooks: RunHooks, session: Session, typed: str, run_id: str) -> None:
    """SessionStart (once per session object: `startup` when new, `resume` when loaded) and
    UserPromptSubmit; what they add is context after the prompt. HookStopped on a refusal."""
    context: list[str] = []
    if not session.hooks_started:
        session.hooks_started = True
        source = "resume" if len(session.runs) > 1 else "startup"
        context += await hooks.session_start(source)
    context += await hooks.user_prompt_submit(typed)
    if context:
        text = "\n\n".join(context)
        session.history.append(Entry({"role": "user", "content": text}, "note", run_id))


def _forget_unanswered(session: Session, prompt_entry: Entry) -> None:
    """A prompt with images the model refused (it never answered it) is not the conversation's:
    kept, every later request of the session would be refused the same way (Decision 54)."""
    if prompt_entry not in session.history:
        return
    start = session.history.index(prompt_entry)
    if not any(e.kind == "assistant" for e in session.history[start:]):
        del session.history[start:]


async def _uncancellable(
    coro: Awaitable[RunReport], hurry: Callable[[], None] | None = None
) -> RunReport:
    """`coro` run to its end whatever cancels the caller meanwhile (each such cancel calls
    `hurry`, to cut waits short); the caller's cancel is absorbed, the report returned."""
    task = asyncio.ensure_future(coro)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            if hurry is not None:
                hurry()


def _redacting(emit: EventSink, redact: Redactor) -> EventSink:
    """Secrets out of every event (and every string well-formed, even with no secret to hide).
    Model text is a stream of deltas and a secret can straddle two of them: the tail that could
    start a secret waits for the next delta (or event)."""
    # (kind, agent id) -> held-back text
    pending: dict[tuple[type[TextDelta | ThinkingDelta], str], str] = {}

    def flush(key: tuple[type[TextDelta | ThinkingDelta], str]) -> None:
        if held := pending.pop(key, ""):
            emit(key[0](redact(held), agent_id=key[1]))

    def sink(event: Event) -> None:
        if isinstance(event, TextDelta | ThinkingDelta):  # both are streams of model deltas
            key = (type(event), event.agent_id)
            for other in [k for k in pending if k != key]:
                flush(other)
            text = redact(pending.pop(key, "") + event.text)
            if keep := redact.held_back(text):
                text, pending[key] = text[:-keep], text[-keep:]
            if text:
                emit(replace(event, text=text))
            return
        for key in list(pending):
            flush(key)
        emit(redacted(event, redact))

    return sink
