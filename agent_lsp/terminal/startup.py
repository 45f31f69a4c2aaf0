"""`agent-lsp run`'s start-up, up to its first model request (issue 33, Decision 72).

Nearly all of it is imports (the core and the `openai` SDK, ~1 s of CPU on a loaded machine),
and imports allocate: with the cyclic collector on, each import's objects are walked again and
again by collections that find almost nothing to free (~20% of the start-up's CPU). So `pause`
turns the collector off at process start and `resume` turns it on once the first model request
is on its way: everything start-up built moves to the permanent generation first
(`gc.freeze`, as the servers' warm-up does), so no later collection walks it and the first
one does not walk every object made while paused. The SDK is imported at process start too,
in a thread, so its file reads overlap ours.

Standard library only at the top: imported before anything else of the command."""

from __future__ import annotations

import gc
import importlib
import logging
import threading

log = logging.getLogger(__name__)

_paused = False


def pause() -> None:
    """Collector off and the SDK's import started (a daemon thread: a run that ends before its
    first model call does not wait for it)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True
    threading.Thread(target=_import_sdk, name="agent-lsp-sdk-import", daemon=True).start()


def _import_sdk() -> None:
    try:
        importlib.import_module("openai")
    except Exception as exc:  # the first model call imports it again and reports the problem
        log.debug("importing the model SDK at start-up failed: %s", exc)


def resume() -> None:
    """Collector on again, what start-up built frozen; a no-op unless `pause` turned it off
    (a run started in-process, by a test or another front end, keeps the caller's collector)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
