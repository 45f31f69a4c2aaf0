"""Loads the official ACP Python SDK (`agent-client-protocol`, import name `acp`) fast enough for
an editor's start-up wait."""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

PINNED = "0.12.1"  # the SDK version the ACP front end was written and tested against
_lock = threading.Lock()


def load() -> ModuleType:
    """`import acp`, without pydantic's per-class docstring extraction.

    The SDK's generated schema (~280 models) turns on pydantic's `use_attribute_docstrings`,
    which re-reads and re-tokenises the 5,800-line module for every model at import: about 40%
    of the import, on the path to the `initialize` answer. Those docstrings only become JSON
    Schema descriptions, which nothing here generates, so they are skipped for this one import
    (and the hook put back at once). If pydantic's internals ever move, the plain import runs."""
    with _lock:
        if "acp.schema" in sys.modules:
            return importlib.import_module("acp")
        try:
            from pydantic._internal import _fields
        except ImportError:  # pragma: no cover - a pydantic without this module: plain import
            return importlib.import_module("acp")
        original = getattr(_fields, "extract_docstrings_from_cls", None)
        if original is None:  # pragma: no cover
            return importlib.import_module("acp")
        _fields.extract_docstrings_from_cls = _no_docstrings
        try:
            return importlib.import_module("acp")
        finally:
            _fields.extract_docstrings_from_cls = original


def _no_docstrings(cls: type, use_inspect: bool = False) -> dict[str, str]:
    return {}
