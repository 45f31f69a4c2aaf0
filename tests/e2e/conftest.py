from __future__ import annotations

import os

import pytest
import pytest_asyncio

from tests.e2e.harness import start_editor

E2E_TIMEOUT = 60  # seconds: a backstop; every wait inside a test has its own, shorter timeout


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace("\\", "/") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))


# The files whose servers run in this process (tests/e2e/inprocess.py, CONTRACT Decision 71): the
# same server object over real JSON-RPC pipes, without an interpreter start per test. Every other
# file keeps a subprocess: start-up, signals, stdin close, orphans, the sandbox, the key scrub,
# exit codes, the server's pid, a server environment of its own (`env=`), the real language
# servers; and so do the tests named in PROCESS_TESTS.
IN_PROCESS_FILES = frozenset({
    "e2e/test_approvals.py",
    "e2e/test_attach_lsp.py",
    "e2e/test_budget_lsp.py",
    "e2e/test_cancel_sessions.py",
    "e2e/test_code_actions.py",
    "e2e/test_commands_settings.py",
    "e2e/test_edit_review.py",
    "e2e/test_edits.py",
    "e2e/test_hooks_lsp.py",
    "e2e/test_line_breaks.py",
    "e2e/test_progress_stream.py",
    "e2e/test_prompt_consent_lsp.py",
    "e2e/test_prompt_files_lsp.py",
    "e2e/test_rewind.py",
    "e2e/test_rules_lsp.py",
    "e2e/test_setup_lsp.py",
    "e2e/test_smoke_lsp.py",
    "e2e/test_steer_queue.py",
    "e2e/test_tools_editor.py",
    "e2e/test_wording_health.py",
    "reliability/test_endpoints_thinking.py",
    "reliability/test_faults_lsp.py",
    "reliability/test_hostile.py",
    "reliability/test_internal_errors.py",
    "reliability/test_rewind_confined.py",
    "reliability/test_session_claim.py",
    "reliability/test_stop_cause.py",
    "reliability/test_trust_boundary.py",
})
PROCESS_TESTS = frozenset({
    "e2e/test_commands_settings.py::test_the_api_key_never_reaches_the_editor",  # the key scrub
    "e2e/test_tools_editor.py::test_a_catastrophic_regex_is_answered_and_leaves_no_busy_thread",  # its CPU
    "reliability/test_stop_cause.py::test_the_server_going_away_mid_run_is_a_shutdown",  # exit, stdin close
})


@pytest_asyncio.fixture
async def open_editor(request, workspace, model):
    """Factory: start the real server under a scripted editor; stopped at teardown."""
    editors = []
    # AGENT_LSP_TEST_SUBPROCESS=1: every server a subprocess again (to compare, or to bisect)
    where = f"{request.path.parent.name}/{request.path.name}"
    inprocess = (where in IN_PROCESS_FILES and f"{where}::{request.node.originalname}" not in PROCESS_TESTS
                 and not os.environ.get("AGENT_LSP_TEST_SUBPROCESS"))

    async def start(caps="visual-studio-code", init: dict | None = None, **kwargs):
        options = {"model": "m", "baseUrl": model.base_url, "approval": {"default": "ask"}, **(init or {})}
        kwargs.setdefault("inprocess", inprocess)
        editor = await start_editor(workspace, caps, init_options=options, **kwargs)
        editors.append(editor)
        return editor

    yield start
    for editor in editors:
        await editor.quit()
