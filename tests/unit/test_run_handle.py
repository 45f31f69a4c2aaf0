"""A run's handle: its cancel token keeps the first cause and never makes a second stop; steers
are taken in order and refused once the run's stop began (CONTRACT Decisions 50, 73, 76)."""

from __future__ import annotations

import asyncio

from agent_lsp.agent.loop.handle import RunHandle, RunPhase
from agent_lsp.agent.messages import CancelCause, StopCause
from agent_lsp.agent.state.session import Session

SIGNAL = CancelCause(StopCause.SIGNAL, "SIGTERM")
USER = CancelCause(StopCause.USER)


async def test_the_first_cause_wins_and_a_second_cancel_cancels_nothing_more():
    task = asyncio.ensure_future(asyncio.sleep(30))
    handle = RunHandle("r-1", Session(), task=task, started=True)
    hurried = []
    handle._hurry = lambda: hurried.append(True)

    assert handle.cancel(SIGNAL) is True
    assert handle.cancel(USER) is True  # not finished yet: still true, and harmless
    assert handle.cancel_cause == SIGNAL and handle.cause() == SIGNAL
    assert task.cancelling() == 1  # one stop, not two
    assert hurried == [True]  # the second cancel only cuts the end's waits short
    await asyncio.gather(task, return_exceptions=True)
    handle.finished(None)
    assert handle.cancel(USER) is False and handle.state == RunPhase.FINISHED


async def test_a_handle_cancelled_before_its_task_began_is_cancelled_as_it_begins():
    task = asyncio.ensure_future(asyncio.sleep(30))
    handle = RunHandle("r-1", Session(), task=task)  # not started: the host's drive re-arms it
    assert handle.cancel(USER) is True
    assert task.cancelling() == 0 and handle.cancel_cause == USER
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_steers_keep_their_order_and_are_refused_once_the_stop_began():
    task = asyncio.ensure_future(asyncio.sleep(30))
    handle = RunHandle("r-1", Session(), task=task, started=True)
    assert handle.steer("one") and handle.steer("two")
    assert handle.waiting_steers() == ["one", "two"]
    assert handle.take_steers() == ["one", "two"] and handle.take_steers() == []
    handle.cancel(USER)
    assert handle.steer("too late") is False
    await asyncio.gather(task, return_exceptions=True)


async def test_a_queued_handle_refuses_steers_and_its_cancel_takes_it_out_of_the_queue():
    taken = []
    handle = RunHandle(
        "r-2", Session(), state=RunPhase.QUEUED, unqueue=lambda h, cause: taken.append((h, cause))
    )
    assert handle.steer("hello") is False
    assert handle.cancel(USER) is True
    assert taken == [(handle, USER)]
