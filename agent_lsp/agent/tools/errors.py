"""The errors a tool raises for the model to read (never fatal to the run)."""

from __future__ import annotations


class ToolError(Exception):
    """A failure the model should read and handle: never fatal to the run."""


class EditRejected(ToolError):
    """The user rejected the edit in the editor's preview: a denial, not a failure."""
