"""Issue 24 / Decision 34 over ACP: the user's commands and skills advertised with
`available_commands_update` after session/new and session/load (beside /plan and /rewind), and
a `/name args` prompt runs that prompt file, the session titled as typed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.conftest import model_settings

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def advertised(client, session_id: str) -> dict[str, dict]:
    updates = client.updates(session_id, "available_commands_update")
    assert updates, "no available_commands_update"
    return {c["name"]: c for c in updates[-1]["availableCommands"]}


def test_commands_are_advertised_and_a_slash_prompt_runs_its_file(connect, model, workspace: Path, home: Path):
    write(workspace / ".claude" / "commands" / "review.md",
          "---\ndescription: Review a file\nargument-hint: <file>\n---\nReview $1 for bugs.\n")
    write(workspace / ".claude" / "commands" / "git" / "commit.md", "Commit the staged files.\n")
    write(home / ".agents" / "skills" / "house-style" / "SKILL.md",
          "---\nname: house-style\ndescription: Our writing style.\n---\nShort sentences.\n")
    write(workspace / ".claude" / "skills" / "broken" / "SKILL.md", "---\nname: broken\n---\nno description\n")
    model.add([{"text": "Reviewed."}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.wait_for(lambda e: e["type"] == "update" and e["params"]["update"]["sessionUpdate"] == "available_commands_update")

    commands = advertised(client, session_id)
    assert list(commands) == ["plan", "rewind", "git:commit", "review", "house-style"]
    assert commands["review"]["description"] == "Review a file"
    assert commands["review"]["input"] == {"hint": "<file>"}
    assert commands["house-style"]["description"] == "Our writing style."
    assert "input" not in commands["git:commit"] or commands["git:commit"]["input"] is None

    assert client.prompt(session_id, "/review calc.py")["stopReason"] == "end_turn"
    user = [m for m in model.requests[0]["messages"] if m["role"] == "user"]
    assert user[0]["content"] == "Review calc.py for bugs.\n\nARGUMENTS: calc.py"
    titles = [u["title"] for u in client.updates(session_id, "session_info_update") if u.get("title")]
    assert titles[-1] == "/review calc.py"
    # the skill block names the user's skill; the broken one is not offered
    system = model.requests[0]["messages"][0]["content"]
    assert "- house-style: Our writing style." in system and "broken" not in system
    client.close()

    # session/load announces them again, after the replay
    model.add([{"text": "Committed."}])
    second = connect(model_settings(model))
    second.initialize()
    load = second.send("session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []})
    assert second.response(load) is not None
    second.wait_for(lambda e: e["type"] == "update" and e["params"]["update"]["sessionUpdate"] == "available_commands_update")
    assert list(advertised(second, session_id)) == ["plan", "rewind", "git:commit", "review", "house-style"]
    # a unique short name finds `ns:name`
    assert second.prompt(session_id, "/commit")["stopReason"] == "end_turn"
    assert [m for m in model.requests[1]["messages"] if m["role"] == "user"][-1]["content"] == "Commit the staged files."
    second.close()


def test_a_new_prompt_file_updates_the_list_and_unknown_names_stay_text(connect, model, workspace: Path, home: Path):
    model.add([{"text": "one"}, {"text": "two"}])
    client = connect(model_settings(model))
    client.initialize()
    session_id = client.new_session(workspace)
    client.wait_for(lambda e: e["type"] == "update" and e["params"]["update"]["sessionUpdate"] == "available_commands_update")
    assert list(advertised(client, session_id)) == ["plan", "rewind"]

    assert client.prompt(session_id, "/etc/hosts is broken")["stopReason"] == "end_turn"
    assert [m for m in model.requests[0]["messages"] if m["role"] == "user"][0]["content"] == "/etc/hosts is broken"

    write(workspace / ".agents" / "commands" / "tidy.md", "Tidy up.\n")
    assert client.prompt(session_id, "/tidy")["stopReason"] == "end_turn"
    assert [m for m in model.requests[1]["messages"] if m["role"] == "user"][-1]["content"] == "Tidy up."
    assert list(advertised(client, session_id)) == ["plan", "rewind", "tidy"]
    client.close()
