"""Issue 24 / Decisions 33-35, headless: the user's skills in the system prompt and loaded by the
`skill` tool (their files readable, even outside the workspace), `/name args` commands expanded
with their model and a user command's allowed-tools, through the real `agent-lsp run`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, last_tool_results, tools_reply

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


def system_prompt(request: dict) -> str:
    return request["messages"][0]["content"]


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def test_skills_are_listed_loaded_and_their_files_read(model, workspace, home):
    skill = write(home / ".agents" / "skills" / "pdf-forms" / "SKILL.md",
                  "---\nname: pdf-forms\ndescription: Fill PDF forms with the house script.\n---\n"
                  "Run scripts/fill.py with the form's path.\n")
    script = write(skill.parent / "scripts" / "fill.py", "print('FILLED')\n")
    write(workspace / ".claude" / "skills" / "changelog" / "SKILL.md",
          "---\nname: changelog\ndescription: Write CHANGELOG entries.\n---\nBullets, past tense.\n")
    model.add([
        tools_reply({"name": "skill", "id": "s", "arguments": {"name": "pdf-forms"}}),
        tools_reply(call("read_file", id="r", path=str(script.resolve()))),
        {"text": "Filled."},
    ])

    proc = run_cli(agent_run(model, workspace, "fill the form"))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = model.requests[0]
    system = system_prompt(first)
    assert "## Skills" in system
    assert "- changelog: Write CHANGELOG entries.\n- pdf-forms: Fill PDF forms with the house script." in system
    assert "Run scripts/fill.py" not in system, "bodies load only through the skill tool"
    assert "skill" in tool_names(first)
    loaded = last_tool_results(model.requests[1])["s"]
    assert loaded.startswith("Run scripts/fill.py with the form's path.")
    assert f"Files (read with read_file): {script.resolve()}" in loaded
    # the skill lives outside the workspace, yet its files are readable once it is loaded
    assert "FILLED" in last_tool_results(model.requests[2])["r"]
    # the same skills give a byte-identical system prompt (the provider's cache keeps it)
    model.add([{"text": "again"}])
    proc = run_cli(agent_run(model, workspace, "once more"))
    assert proc.returncode == 0 and system_prompt(model.requests[3]) == system


def test_a_skills_files_are_not_readable_before_it_is_loaded(model, workspace, home):
    skill = write(home / ".claude" / "skills" / "secret-tool" / "SKILL.md",
                  "---\nname: secret-tool\ndescription: d\n---\nbody\n")
    script = write(skill.parent / "run.sh", "echo hi\n")
    model.add([tools_reply(call("read_file", id="r", path=str(script.resolve()))), {"text": "no"}])
    proc = run_cli(agent_run(model, workspace, "read it"))
    assert proc.returncode == 0, proc.stderr
    assert "outside the workspace folders" in last_tool_results(model.requests[1])["r"]


def test_without_skills_the_prompt_and_the_tools_are_unchanged(model, workspace, home):
    model.add([{"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "hello"))
    assert proc.returncode == 0, proc.stderr
    assert "## Skills" not in system_prompt(model.requests[0])
    assert "skill" not in tool_names(model.requests[0])


def test_a_slash_command_runs_its_prompt_file_with_its_arguments(model, workspace, home):
    write(workspace / ".claude" / "commands" / "fix-issue.md",
          "---\ndescription: Fix an issue\nargument-hint: [number] [priority]\n---\n"
          "Fix issue #$1 (priority $2) following our conventions.\n")
    write(workspace / ".agents" / "commands" / "docs" / "explain.md", "Explain the module simply.\n")
    model.add([{"text": "Fixed."}, {"text": "Explained."}, {"text": "Text."}])

    proc = run_cli(agent_run(model, workspace, '/fix-issue 42 "very high"'))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    user = [m for m in model.requests[0]["messages"] if m["role"] == "user"]
    # Decision 34: a body without `$ARGUMENTS` gets them appended (`$1` and `$2` filled too)
    assert user[0]["content"] == ('Fix issue #42 (priority very high) following our conventions.\n\n'
                                  'ARGUMENTS: 42 "very high"')
    assert "/fix-issue: project command" in proc.stderr  # the run says what it runs

    proc = run_cli(agent_run(model, workspace, "/explain calc.py"))
    assert proc.returncode == 0, proc.stderr
    user = [m for m in model.requests[1]["messages"] if m["role"] == "user"]
    assert user[0]["content"] == "Explain the module simply.\n\nARGUMENTS: calc.py"

    proc = run_cli(agent_run(model, workspace, "/etc/hosts is broken"))  # not a command: text
    assert proc.returncode == 0, proc.stderr
    assert [m for m in model.requests[2]["messages"] if m["role"] == "user"][0]["content"] == "/etc/hosts is broken"

    # the session's title is the prompt as typed
    listed = subprocess.run([sys.executable, "-m", "agent_lsp", "sessions", "--workspace", str(workspace), "--json"],
                            capture_output=True, text=True, timeout=30)
    titles = {s["title"] for s in json.loads(listed.stdout)}
    assert '/fix-issue 42 "very high"' in titles and "/explain calc.py" in titles


def test_a_commands_model_goes_through_model_aliases_for_that_run_only(model, workspace, home, tmp_path):
    write(home / ".claude" / "commands" / "deep.md", "---\nmodel: opus\n---\nThink hard about $ARGUMENTS\n")
    write(workspace / ".claude" / "commands" / "quick.md", "---\nmodel: haiku\n---\nQuick look.\n")
    settings = write(tmp_path / "settings.json", json.dumps({"modelAliases": {"opus": "big-model"}}))
    model.add([{"text": "deep"}, {"text": "quick"}])

    proc = run_cli(agent_run(model, workspace, "/deep the cache", "--settings", str(settings)))
    assert proc.returncode == 0, proc.stderr
    assert model.requests[0]["model"] == "big-model"
    session = report_of(proc.stdout)["sessionId"]
    # unmapped Claude names run on the run's own model; the command's model was for its run only
    proc = run_cli(agent_run(model, workspace, "/quick", "--settings", str(settings), "--session", session))
    assert proc.returncode == 0, proc.stderr
    assert model.requests[1]["model"] == "m"


def test_a_user_commands_allowed_tools_run_without_asking_and_a_projects_do_not(model, workspace, home):
    body = "---\nallowed-tools: Bash(python3:*)\n---\nRun the check.\n"
    write(home / ".claude" / "commands" / "check.md", body)
    write(workspace / ".claude" / "commands" / "pcheck.md", body)
    write(workspace / "check.py", "print(40 + 2)\n")
    command = "python3 check.py"
    model.add([tools_reply(call("run_command", id="c", command=command)), {"text": "done"},
               tools_reply(call("run_command", id="c", command=command)), {"text": "done"}])

    # no --yes and no terminal: without the pre-allow, a command is denied
    proc = run_cli(agent_run(model, workspace, "/check", yes=False))
    assert proc.returncode == 0, proc.stderr
    assert last_tool_results(model.requests[1])["c"].startswith("exit code 0")
    assert "42" in last_tool_results(model.requests[1])["c"]

    proc = run_cli(agent_run(model, workspace, "/pcheck", yes=False))
    assert proc.returncode == 0, proc.stderr
    assert "denied" in last_tool_results(model.requests[3])["c"].lower()
    assert "allowed-tools are not applied" in proc.stderr
