"""One run of the agent on a session: the loop wired to its host's ports, ended by a report."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

from agent_lsp.agent.events import (
    Event,
    StatusEvent,
    StopEvent,
    TextDelta,
    ThinkingDelta,
    redacted,
)
from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.exec.background import BackgroundProcesses
from agent_lsp.agent.exec.process import kill_group
from agent_lsp.agent.images import user_content
from agent_lsp.agent.loop.attach import AttachmentRefused, attached_text
from agent_lsp.agent.loop.budget import Budget
from agent_lsp.agent.loop.handle import RunHandle, uncancellable
from agent_lsp.agent.loop.loop import AgentLoop
from agent_lsp.agent.loop.memory import recall_memory
from agent_lsp.agent.loop.run_state import RunOptions, RunState
from agent_lsp.agent.loop.services import ApprovalGate, Limits, LoopTools, RunSeams, RunStats, Spill
from agent_lsp.agent.loop.stops import LoopOutcome
from agent_lsp.agent.loop.structured import answer_in_schema
from agent_lsp.agent.loop.verify import Verification
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
    announcer_of,
    answers_diagnostics,
    folder_names,
)
from agent_lsp.agent.state.checkpoints import RunCheckpoint
from agent_lsp.agent.state.history import RunEvents
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

__all__ = ["RunHandle", "RunOptions", "Session", "new_id", "run_task", "uncancellable"]

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


@dataclass(eq=False)
class _Built:
    """What run_task makes for a run before its loop: the run's state and the parts its loop,
    its drive and its end need."""

    run: RunState
    runner: CommandRunner
    policy: ApprovalPolicy
    granted: RunPermissions
    env: dict[str, str]
    model_name: str | None  # this run's model only (a command's), else the session's
    prompt_entry: Entry
    main: AgentLoop | None = None  # once made


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
    handle: RunHandle | None = None,
) -> RunReport:
    """Run the agent on one user message: the run built, its loop driven, then ended by its
    handle (handle.py), which a host made (none: the run gets its own). Always returns a
    report, whatever happens."""
    prompt = wellformed(prompt)  # a client's `\\ud800`, argv's undecodable bytes
    options = options or RunOptions()
    run_id = run_id or options.run_id or new_id("r")
    own = handle is None
    if handle is None:
        handle = RunHandle(run_id, session, task=asyncio.current_task(), started=True)
    if env is None:
        env = options.env if options.env is not None else keyguard.environment()
    built = _build(prompt, session, settings, workspace, approver, emit, run_id, env, options)
    handle.background = built.run.tool_ctx.background  # agentLsp.stopProcess reaches them
    built.run.seams.model = model or options.model  # type: ignore[assignment]  # None: made later
    try:
        outcome = await _drive(built, prompt, settings, workspace, options, handle)
    except BaseException:  # the process is going down (KeyboardInterrupt, SystemExit)
        for proc in list(built.run.tool_ctx.processes):
            kill_group(proc)
        session.running = None
        raise
    # The stop is decided, and the first cause fixes it (Decision 73): the handle ends the run.
    if options.images and outcome.cause == StopCause.MODEL:
        _forget_unanswered(session, built.prompt_entry)
    owns_model = (model or options.model) is None
    report = await handle.end(
        built.run, built.main, outcome, built.runner, owns_model=owns_model, options=options
    )
    if own:
        handle.finished(report)
    return report


def _build(
    prompt: str,
    session: Session,
    settings: Settings,
    workspace: Workspace,
    approver: Approver,
    emit: EventSink,
    run_id: str,
    env: dict[str, str],
    options: RunOptions,
) -> _Built:
    """The run's parts (transcript, paths, runner, approval gate, seams), its record claimed
    in the session and its prompt in the history."""
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
    record.events = shown = RunEvents(run_id, transcript, options.images)  # agentLsp.history
    # The tools write into the record's own changes: the report, the session index and the
    # session's edited files all read that one record.
    tool_ctx = ToolContext(workspace=workspace, paths=paths, changes=record.changes, runner=runner)
    if options.checkpoints is not None:
        tool_ctx.checkpoint = RunCheckpoint(options.checkpoints, workspace, run_id, session.id)
    tool_ctx.code_intel = _code_intel(options, session, paths.roots)
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
    model_name = options.model_name or session.model  # a command's own model (Decision 34)
    sink = _UntilStop(_redacting(shown.tee(emit), redact))
    seams = _seams(run_id, sink, transcript, session, settings, gate, paths)
    tool_ctx.background = BackgroundProcesses(sink)  # run_command {background} (issue 35)
    seams.pricing = settings.pricing.get(model_name or settings.model)
    seams.telemetry = options.telemetry or NoTelemetry()
    run = RunState(seams, tool_ctx, session, settings, paths, record)
    run.verification = _verification(settings, granted, tool_ctx, paths)
    entry = Entry(
        {"role": "user", "content": user_content(prompt, options.images)}, "prompt", run_id
    )
    built = _Built(run, runner, policy, granted, env, model_name, entry)
    # A tool's own status line (an edit applied late in the editor's preview) carries the turn
    # the main loop is in (or ended in), like every other status line.
    # After the run's stop (an edit the user applied in the preview after a cancel), the
    # stream is over: the editor says it and the log keeps it (Decision 73).
    def notify(text: str) -> None:
        if not sink.stopped:
            seams.emit(StatusEvent(text, built.main.turn if built.main is not None else 0))
            return
        log.info("%s", text)
        announce = announcer_of(workspace)
        if announce is not None:
            announce.announce(text)

    tool_ctx.notify = notify
    tool_ctx.spawn_subagent = run.spawn_subagent
    tool_ctx.prompt_files = options.prompt_files
    tool_ctx.allow_read = session.add_spill_file
    for path in options.readable:  # the files of a skill run as a /command
        session.add_spill_file(path)
    session.running = run_id
    session.runs.append(record)
    session.title = session.title or " ".join((options.title or prompt).split())
    session.history.append(entry)
    return built


def _verification(
    settings: Settings, granted: RunPermissions, ctx: ToolContext, paths: PathGuard
) -> Verification:
    """The run's checks: the user's own `verify`, else the project's once consented (the
    permission source gives it only then, Decision 83)."""
    return Verification(
        settings.verify if granted.verify is None else granted.verify, ctx, paths
    )


def _seams(
    run_id: str,
    emit: EventSink,
    transcript: Transcript,
    session: Session,
    settings: Settings,
    gate: ApprovalGate,
    paths: PathGuard,
) -> RunSeams:
    """What the run hands each of its loops (its model is set by run_task)."""
    redact = transcript.redact
    # A result cut to fit names its spill file, which the session's read_file may then read.
    spill = Spill(
        state_dir() / "spill" / run_id, settings.tool_output_limit, session.add_spill_file
    )
    return RunSeams(
        run_id,
        None,  # type: ignore[arg-type]  # set by run_task, made before the first model call
        emit,
        transcript,
        redact,
        session.estimator,
        Limits(settings.context_window, settings.tool_output_limit, settings.request_timeout),
        RunStats(),
        gate,
        spill,
        # this run's record is in session.runs
        changed_files=lambda: [paths.display(p) for p in session.edited],
        budget=Budget(settings.budget.max_cost_usd),
    )


async def _drive(
    built: _Built,
    prompt: str,
    settings: Settings,
    workspace: Workspace,
    options: RunOptions,
    handle: RunHandle,
) -> LoopOutcome:
    """The run's loop driven to its outcome; every way it can stop becomes one (a cancel says
    its first cause, the handle's)."""
    try:
        return await _main(built, prompt, settings, workspace, options, handle)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        cancel = handle.cause()
        return _outcome(built, cancel.cause, note=cancel.by)
    except HookStopped as exc:  # a prompt refused, or `continue: false` before the loop
        _drop_prompt(built)
        return _outcome(built, StopCause.HOOK, str(exc), text="")
    except AttachmentRefused as exc:  # before any model call (Decision 75)
        _drop_prompt(built)
        return _outcome(built, StopCause.MODEL, str(exc), text="")
    except ModelError as exc:  # no model client could be made (no key, a bad endpoint)
        return LoopOutcome(StopCause.MODEL, "", 0, str(exc))
    except Exception as exc:  # the loop must explain every stop, even a bug of ours
        log.exception("run %s failed", built.run.seams.run_id)
        return _outcome(built, StopCause.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")


def _drop_prompt(built: _Built) -> None:
    """A refused prompt is not the conversation's: a follow-up goes on without it."""
    history = built.run.session.history
    if built.prompt_entry in history:
        history.remove(built.prompt_entry)


async def _attach(built: _Built, prompt: str, workspace: Workspace, options: RunOptions) -> None:
    """The attached files read now (the run starts), put before the prompt in its own message:
    the prompt's entry is made again, before anything saw it (AttachmentRefused: unreadable)."""
    run = built.run
    blocks = await attached_text(options.context, workspace, run.paths, run.tool_ctx.hidden)
    history = run.session.history
    entry = Entry(
        {"role": "user", "content": user_content(blocks + prompt, options.images)},
        "prompt",
        run.record.run_id,
    )
    history[history.index(built.prompt_entry)] = entry
    built.prompt_entry = entry


def _outcome(
    built: _Built,
    cause: StopCause,
    error: str | None = None,
    *,
    note: str | None = None,
    text: str | None = None,
) -> LoopOutcome:
    main = built.main
    last = text if text is not None else main.last_text if main is not None else ""
    return LoopOutcome(cause, last, main.turn if main is not None else 0, error, note=note)


async def _main(
    built: _Built,
    prompt: str,
    settings: Settings,
    workspace: Workspace,
    options: RunOptions,
    handle: RunHandle,
) -> LoopOutcome:
    """The main agent's loop: the session saved, the model client and the hooks made, what it
    is offered, the start record, the SessionStart/UserPromptSubmit hooks, then the loop."""
    run, session = built.run, built.run.session
    seams, paths, transcript = run.seams, run.paths, run.seams.transcript
    if options.refusal is not None:
        raise AttachmentRefused(options.refusal)
    if options.context:
        await _attach(built, prompt, workspace, options)
    if options.on_record is not None:
        await options.on_record(session, run.record)
    if seams.model is None:
        seams.model = make_model(settings, built.env, built.model_name)
    seams.hooks, problems = await load_run_hooks(
        settings.hooks,
        paths.roots,
        session_id=session.id,
        transcript=transcript,
        env=built.env,
        runner=built.runner,
        emit=seams.emit,
        consented=options.hook_consent or built.granted.hook_consent,
        files=built.granted.claude_files,
    )
    for problem in problems:  # a malformed declaration is named, never skipped silently
        seams.emit(StatusEvent(f"hooks: {problem}", 0))  # before turn 1
    memory = await recall_memory(paths.roots, settings.memory_files)
    memory_text = seams.redact("".join(f"\n\n## Memory: {label}\n{text}" for label, text in memory))
    tool_ctx = run.tool_ctx
    tools, withheld, system = _offer(
        options, settings, built.policy, tool_ctx, workspace, paths, memory_text
    )
    run.parent_tools = tools  # what a user's agent's tools may narrow (Decision 35)
    box = LoopTools(ToolBox(tools, withheld), tool_ctx)
    main = built.main = AgentLoop(seams, "main", box, settings.max_turns, session.history, system)
    main.steering = handle  # steers go to the main agent only
    main.verification = run.verification  # checks before `done` (the main agent's edits)
    main.calls.observe = run.verification.observe if run.verification is not None else None
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
        await session_hooks(seams.hooks, session, options.title or prompt, run.record.run_id)
    outcome = await main.loop()
    if options.output_schema is not None:
        outcome, check = await answer_in_schema(main, outcome, options.output_schema, seams.redact)
        run.structured = Structured(check.value) if check is not None else None
    return outcome


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


class _UntilStop:
    """The run's stream ends with its `stop` event: nothing follows it (Decision 73), e.g. a
    tool's late status line or a hook still settling when a second cancel cut the end short."""

    def __init__(self, emit: EventSink):
        self.emit = emit
        self.stopped = False

    def __call__(self, event: Event) -> None:
        if self.stopped:
            log.debug("dropped a %s event after the run's stop", event.kind)
            return
        self.stopped = isinstance(event, StopEvent) and event.agent_id == "main"
        self.emit(event)


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
