"""Loads the official ACP Python SDK (`agent-client-protocol`, import name `acp`) fast enough for
an editor's start-up wait."""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

PINNED = "0.12.1"  # the SDK version the ACP front end was written and tested against
_lock = threading.Lock()


def load() -> ModuleType:
    """`import acp` (once; from any thread)."""
    with _lock:
        return importlib.import_module("acp")
