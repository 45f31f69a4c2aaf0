"""How a run ends: the model client it made closed, its report built and written to the
transcript, the session saved, and the stop explained in words (what was done, what is left)."""

from __future__ import annotations

import logging
import time
from typing import Any

from agent_lsp.agent.events import StopEvent
from agent_lsp.agent.loop.loop import AgentLoop
from agent_lsp.agent.loop.model_call import usage_line
from agent_lsp.agent.loop.run_state import RunOptions, RunState, plural
from agent_lsp.agent.loop.stops import LoopOutcome
from agent_lsp.agent.loop.verify import stop_text
from agent_lsp.agent.messages import RunReport, StopCause, StopReason
from agent_lsp.agent.state.session import KEPT

log = logging.getLogger(__name__)


async def close_run(
    run: RunState,
    main: AgentLoop | None,
    outcome: LoopOutcome,
    owns_model: bool,
    options: RunOptions,
) -> RunReport:
    seams, session, settings = run.seams, run.session, run.settings
    transcript, redact, stats = seams.transcript, seams.redact, seams.stats
    if owns_model and hasattr(seams.model, "aclose"):  # the client this run made, not the caller's
        try:
            await seams.model.aclose()
        except Exception as exc:
            log.debug("closing the model client failed: %s", exc)
    if main is not None:
        await main.record_closed()
        await main.log_pending()
    turns = main.model_calls if main is not None else 0
    report = RunReport(
        run_id=seams.run_id,
        session_id=session.id,
        stop_reason=outcome.reason,
        stop_cause=outcome.cause,
        turns=turns,
        final_text=redact(outcome.final_text),
        summary=redact(explain_stop(outcome, run, turns, options.continue_hint)),
        edited_files=run.record.edited,
        tool_calls=stats.tool_calls,
        denied=stats.denied,
        usage=stats.usage,
        transcript=str(transcript.path),
        error=redact(outcome.error) if outcome.error else None,
        context_tokens=stats.context_tokens,
        context_window=settings.context_window,
        rewindable=False,
        structured_output=run.structured,
        processes=background_report(run),
    )
    if run.verification is not None:
        report.verification = run.verification.report()
    checkpoint = run.tool_ctx.checkpoint
    if checkpoint is not None:
        report.rewindable = await checkpoint.close()
    if run.record.events is not None:  # its coalesced text before the stop, nothing after
        run.record.events.seal()
    await transcript.write("main", turns, "stop", report=report.to_dict())
    await transcript.close()
    run.record.stop = str(outcome.reason)
    run.record.reached = stats.reached_model
    session.updated = time.time()
    if options.on_record is not None:
        try:
            await options.on_record(session, run.record)
        except Exception as exc:  # the report must still go out
            log.warning("could not save session %s: %s", session.id, exc)
    text = stop_text(str(report.stop_reason), report.summary, report.verification)
    seams.emit(StopEvent(text, report))
    return report


def background_report(run: RunState) -> list[dict[str, Any]]:
    """The run's background processes as the report lists them (Decision 60)."""
    background = run.tool_ctx.background
    return background.report(run.seams.redact) if background is not None else []


CANCELLED_BY = {  # how a cancelled stop's summary begins, by cause; `by` names the signal
    StopCause.USER: "Cancelled by the user",
    StopCause.SIGNAL: "Stopped by {by}",
    StopCause.SHUTDOWN: "Stopped because the agent was shut down",
}


def explain_stop(outcome: LoopOutcome, run: RunState, turns: int, continue_hint: str) -> str:
    """Every stop says what was done and, unless done, what was left. A run that never heard
    from the model has nothing to continue: it says so instead of the continue hint (no
    session is kept for it, Decision 46). Who cancelled follows from the typed cause."""
    stats = run.seams.stats
    edited = ", ".join(run.paths.display(p) for p in run.record.changes) or "no files"
    done = (
        f"{plural(turns, 'turn')}, {plural(stats.tool_calls, 'tool call')}"
        + (f" ({stats.denied} denied)" if stats.denied else "")
        + f", edited {edited}"
    )
    usage = usage_line(stats.usage_data(run.settings.context_window), run.seams.budget.limit)
    if outcome.reason == StopReason.DONE:
        return f"Done: {done} ({usage})."
    left = f"the task is not finished; {continue_hint}"
    if outcome.reason == StopReason.CANCELLED and not stats.reached_model:
        # a cancel is no problem to fix: the task is simply not done, and the session (when an
        # earlier run kept it) goes on as after any stop
        earlier = any(
            r.reached for r in run.session.runs if r.kind in KEPT and r is not run.record
        )
        left = "the whole task: the model had not answered yet, so nothing was done; " + (
            continue_hint if earlier else "run it again to do it"
        )
    elif not stats.reached_model:
        left = (
            "the whole task: the model never answered, so nothing was done; run it again once "
            "the problem is fixed"
        )
    if outcome.reason == StopReason.MAX_TURNS:
        why = (
            outcome.note
            or f"the turn limit ({run.settings.max_turns} turns, setting maxTurns) came before "
            "the model finished"
        )
        return f"Stopped early: {why}. Done so far: {done}. Left: {left}."
    if outcome.reason == StopReason.CANCELLED:
        who = CANCELLED_BY[outcome.cause].format(by=outcome.note or "a signal")
        return (
            f"{who} after {plural(turns, 'turn')}. Done so far: {done}; edits already applied "
            f"are kept. Left: {left}."
        )
    error = (outcome.error or "unknown error").rstrip(".")
    return f"Stopped by an error: {error}. Done so far: {done}. Left: {left}."
