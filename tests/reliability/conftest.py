"""Reliability and security tests (issue 6): reuse the end-to-end editor fixture."""

from tests.e2e.conftest import open_editor  # noqa: F401  (the real server under a scripted editor)
