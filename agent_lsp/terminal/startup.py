"""`agent-lsp run`'s start-up, up to its first model request (issue 33, Decision 72).

Nearly all of it is imports (the core and the `openai` SDK), and imports allocate: with the
cyclic collector on, start-up's objects are walked again and again by collections that find
almost nothing to free. So `pause` turns the collector off at process start and `resume` turns
it on once its first model request is sent, after moving everything start-up built to
the permanent generation (`gc.freeze`, as the servers' warm-up does): no later collection walks
it, and the first one does not walk every object made while paused.

The SDK is not imported in a thread meanwhile: under the GIL that saves no CPU (measured), and
two threads importing the same modules can meet Python 3.11's import-deadlock detection, which
raises in one of them instead of waiting.

Standard library only: imported before anything else of the command."""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """The collector off until `resume`."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """The collector on again, what start-up built frozen; a no-op unless `pause` turned it off
    (a run started in-process, by a test or another front end, keeps the caller's collector)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
