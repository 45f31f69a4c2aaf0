"""Issue 24 / Decisions 33-34 over LSP (the real server as a subprocess, pytest-lsp): the commands
listed by `agentLsp.commands`, a `/name args` prompt in `agentLsp.run` (with the file and
selection the server adds), the skills block and the skill tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.harness import tool_messages

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("AGENT_LSP_SETTINGS", raising=False)
    return home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("caps", ["visual-studio-code"])  # no edit, no position: one path
async def test_commands_are_listed_and_a_slash_prompt_runs_its_file(open_editor, model, workspace, home, caps):
    write(workspace / ".claude" / "commands" / "explain.md",
          "---\ndescription: Explain code\nargument-hint: [focus]\n---\nExplain this code, focusing on $ARGUMENTS.\n")
    write(home / ".claude" / "commands" / "tools" / "lint.md", "Lint it.\n")
    write(home / ".agents" / "skills" / "style" / "SKILL.md", "---\nname: style\ndescription: House style.\n---\nBe brief.\n")
    write(workspace / ".claude" / "commands" / "broken.md", "---\ndescription: [unclosed\n---\nx\n")
    model.add([{"text": "Explained."}])
    editor = await open_editor(caps)

    assert "agentLsp.commands" in editor.server_capabilities.execute_command_provider.commands
    listed = await editor.execute("agentLsp.commands", {})
    assert [(c["name"], c["source"]) for c in listed] == [("explain", "project"), ("tools:lint", "user"), ("style", "user")]
    explain = listed[0]
    assert explain["description"] == "Explain code" and explain["argumentHint"] == "[focus]"
    assert explain["path"] == str((workspace / ".claude" / "commands" / "explain.md").resolve())
    # the malformed file is named with its error in the editor's log, once
    await editor.wait_for(lambda: any("broken.md is not used: bad YAML" in m.message for m in editor.client.log_messages),
                          10, "the problem in window/logMessage")

    editor.open("calc.py")
    started = await editor.run("/explain error handling", textDocument={"uri": editor.uri("calc.py")})
    report = await editor.wait_stop(started["runId"])
    assert report["stopReason"] == "done"
    user = [m for m in model.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert user.startswith("Explain this code, focusing on error handling.\n\nFile: calc.py"), user
    status = [e["text"] for e in editor.events(started["runId"], "status")]
    assert any(t.startswith("/explain: project command ") for t in status), status
    sessions = await editor.execute("agentLsp.sessions", {})
    assert sessions[0]["title"] == "/explain error handling"


async def test_a_skill_is_loaded_by_the_tool_and_its_files_read(open_editor, model, workspace, home):
    skill = write(home / ".claude" / "skills" / "fixtures" / "SKILL.md",
                  "---\nname: fixtures\ndescription: Build test fixtures.\n---\nUse the template.\n")
    template = write(skill.parent / "template.txt", "TEMPLATE-TEXT\n")
    model.add([
        {"tool_calls": [{"id": "s", "name": "skill", "arguments": {"name": "fixtures"}}]},
        {"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": str(template.resolve())}}]},
        {"text": "Done."},
    ])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("make fixtures")
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    assert "- fixtures: Build test fixtures." in model.requests[0]["messages"][0]["content"]
    loaded = tool_messages(model.requests[1])["s"]
    assert loaded.startswith("Use the template.") and f"Files (read with read_file): {template.resolve()}" in loaded
    assert "TEMPLATE-TEXT" in tool_messages(model.requests[2])["r"]


async def test_an_unknown_slash_command_is_a_status_event_and_goes_to_the_model_as_text(open_editor, model, workspace, home):
    """Issue 32: the user is told a `/name` is no command; the model still gets it (Decision 34)."""
    model.add([{"text": "ok"}])
    editor = await open_editor("visual-studio-code")
    started = await editor.run("/frobnicate the parser")
    assert (await editor.wait_stop(started["runId"]))["stopReason"] == "done"
    status = [e["text"] for e in editor.events(started["runId"], "status")]
    assert any(t.startswith("/frobnicate is not a known command or skill: sent to the model as text") for t in status), status
    assert [m for m in model.requests[0]["messages"] if m["role"] == "user"][-1]["content"].startswith("/frobnicate the parser")
