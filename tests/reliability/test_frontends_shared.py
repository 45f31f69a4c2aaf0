"""Issue 22: "the last rewindable run" is decided once, in the host (CONTRACT "Rewind", Decision
17: the newest finished run with a file it can restore, not rewound). The LSP code action asks it
for the workspace; ACP's `/rewind` without an id asks it for its own session's runs."""

from __future__ import annotations

import asyncio

import pytest

from agent_lsp.agent.fs.disk_workspace import DiskWorkspace
from agent_lsp.agent.host import AgentHost, RunPorts, RunRequest
from tests.unit.kit import Events, ScriptedApprover, call, make_settings, tools_reply

pytestmark = pytest.mark.timeout(90)


async def test_the_last_rewindable_run_of_the_workspace_and_of_one_session(model, workspace, state_dir):
    model.add("EDIT-A", [tools_reply(call("write_file", path="a.txt", content="a\n")), {"text": "wrote a"}])
    model.add("EDIT-B", [tools_reply(call("write_file", path="b.txt", content="b\n")), {"text": "wrote b"}])
    settings = make_settings(model)
    roots = [workspace.resolve()]
    host = AgentHost()
    try:
        reports = {}
        for prompt in ("EDIT-A", "EDIT-B"):  # two sessions of one workspace, B's run the newer
            session, store = await host.open_session(roots, None)
            hosted = host.start(RunRequest(prompt, session=session, store=store, settings=settings,
                                ports=RunPorts(DiskWorkspace(roots), ScriptedApprover(), Events())))
            assert hosted.task is not None
            await asyncio.wait_for(hosted.task, 20)
            assert hosted.report is not None and hosted.report.rewindable
            reports[prompt] = hosted.report
        a, b = reports["EDIT-A"], reports["EDIT-B"]
        assert await host.last_rewindable(roots) == (b.run_id, 1), "the workspace's newest run: the code action"
        assert await host.last_rewindable(roots, session_id=a.session_id) == (a.run_id, 1), "ACP /rewind in session A"

        await host.rewind(roots, DiskWorkspace(roots), a.run_id)
        assert await host.last_rewindable(roots, session_id=a.session_id) is None, "a rewound run is not offered again"
        assert await host.last_rewindable(roots) == (b.run_id, 1)
    finally:
        await host.aclose()


# -- path mapping: ACP names and follows files by the core's rule (PathGuard) -------------------
def two_folders_named_alike(tmp_path):
    first, second = tmp_path / "one" / "app", tmp_path / "two" / "app"
    for root in (first, second):
        (root / "src").mkdir(parents=True)
        (root / "src" / "x.py").write_text("x = 1\n")
    return [first.resolve(), second.resolve()]


def test_acp_shows_a_file_of_the_second_folder_as_the_tools_name_it(tmp_path):
    from agent_lsp.acp.content import shown
    from agent_lsp.acp.tools import resolve_path
    from agent_lsp.agent.tools.paths import PathGuard

    roots = two_folders_named_alike(tmp_path)
    target = roots[1] / "src" / "x.py"
    name = shown(target.as_uri(), roots)
    assert name == PathGuard(roots).display(target) == "app-2/src/x.py"  # not "app/…": that is the first folder's
    assert resolve_path(name, roots) == target, "the name the model is shown leads back to the same file"


@pytest.mark.parametrize("raw", ["../outside.py", "/etc/passwd", "~/.bashrc", "%2e%2e/x.py"])
def test_acp_follow_along_never_points_at_a_path_the_tool_refuses(tmp_path, raw):
    from agent_lsp.acp.tools import tool_locations

    roots = two_folders_named_alike(tmp_path)
    assert tool_locations("read_file", {"path": raw}, roots) == []
    assert tool_locations("search", {"path": raw}, roots) == [{"path": str(roots[0])}]


# -- the user's settings file: read again when it changed, by every front end -------------------
def test_lsp_and_acp_read_the_edited_settings_file_alike(tmp_path, monkeypatch):
    import json

    from agent_lsp.acp.agent import _settings
    from agent_lsp.server.config import SettingsState

    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"maxTurns": 7}))
    monkeypatch.setenv("AGENT_LSP_SETTINGS", str(path))
    monkeypatch.delenv("AGENT_LSP_MAX_TURNS", raising=False)
    lsp = SettingsState()
    lsp.update(init_options={})
    assert lsp.settings.max_turns == 7 == _settings()[0].max_turns

    path.write_text(json.dumps({"maxTurns": 3, "model": "edited"}))
    assert lsp.refresh() == [] and lsp.refresh() == []  # merged again once, nothing to show
    assert (lsp.settings.max_turns, lsp.settings.model) == (3, "edited") == (_settings()[0].max_turns, _settings()[0].model)

    path.write_text("{broken")
    shown = lsp.refresh()
    assert len(shown) == 1 and "not valid JSON" in shown[0] and lsp.user_file_problems == shown
    assert lsp.settings.max_turns == 25 == _settings()[0].max_turns  # none of the broken file applies
