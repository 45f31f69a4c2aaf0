"""Issue 24 / Decision 35, headless: the user's agent definitions used by `delegate {task, agent}`
through the real `agent-lsp run`: the body is the sub-agent's prompt, its tools only narrow the
parent's (unknown names dropped; none: the read-only ones), its model goes through modelAliases,
and its writes are approved as usual."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.headless.test_prompt_files_cli import home, write  # noqa: F401 - the fixture
from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(60)


def tool_names(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


def delegate_schema(request: dict) -> dict:
    return next(t["function"] for t in request["tools"] if t["function"]["name"] == "delegate")


def agents(workspace: Path, home: Path) -> None:
    write(workspace / ".claude" / "agents" / "finder.md",
          "---\nname: finder\ndescription: Finds code by name\ntools: Read, Grep, WebFetch\n---\n"
          "You find code. Answer with path:line only.\n")
    write(home / ".claude" / "agents" / "fixer.md",
          "---\nname: fixer\ndescription: Fixes small bugs\ntools: Read, Edit, Bash, NotebookEdit\nmodel: sonnet\n---\n"
          "You fix bugs with the smallest edit.\n")
    write(workspace / ".agents" / "agents" / "reader.md",
          "---\nname: reader\ndescription: Reads and summarises\nmodel: haiku\n---\nYou summarise.\n")


def test_an_agent_definition_gives_the_sub_agent_its_prompt_and_narrowed_tools(model, workspace, home):
    agents(workspace, home)
    model.add("MAIN", [
        tools_reply(call("delegate", id="d1", task="SUB-FIND where is add", agent="finder"),
                    call("delegate", id="d2", task="SUB-READ summarise calc.py", agent="reader")),
        tools_reply(call("delegate", id="d3", task="SUB-X", agent="nobody")),
        {"text": "done"},
    ])
    model.add("SUB-FIND", [tools_reply(call("search", pattern="def add")), {"text": "calc.py:1"}])
    model.add("SUB-READ", [{"text": "calc.py adds and multiplies"}])

    proc = run_cli(agent_run(model, workspace, "MAIN: find add"))

    assert proc.returncode == 0, proc.stdout + proc.stderr
    main = model.requests_for("MAIN")[0]
    schema = delegate_schema(main)
    assert "agent" in schema["parameters"]["properties"]
    for line in ("- finder: Finds code by name", "- fixer: Fixes small bugs", "- reader: Reads and summarises"):
        assert line in schema["description"]
    find = model.requests_for("SUB-FIND")[0]
    assert find["messages"][0]["content"].startswith("You find code. Answer with path:line only.")
    assert tool_names(find) == {"read_file", "search"}  # WebFetch is not ours: dropped
    read = model.requests_for("SUB-READ")[0]
    assert read["messages"][0]["content"].startswith("You summarise.")
    assert tool_names(read) == {"read_file", "list_files", "search"}  # no `tools`: the read-only ones
    assert read["model"] == "m"  # `haiku`, unmapped: the run's own model
    results = last_tool_results(model.requests_for("MAIN")[1])
    assert results == {"d1": "calc.py:1", "d2": "calc.py adds and multiplies"}
    unknown = last_tool_results(model.requests_for("MAIN")[2])["d3"]
    assert "no agent named 'nobody'" in unknown and "finder, fixer, reader" in unknown


def test_an_agents_writes_are_approved_as_usual_and_its_model_goes_through_aliases(model, workspace, home, tmp_path):
    agents(workspace, home)
    settings = write(tmp_path / "settings.json", json.dumps({"modelAliases": {"sonnet": "sub-model"}}))
    model.add("MAIN", [tools_reply(call("delegate", id="d", task="SUB-FIX make add add", agent="fixer")), {"text": "ok"}] * 2)
    fix = [tools_reply(call("edit_file", id="e", path="calc.py", old_text="a - b", new_text="a + b")), {"text": "tried"}]
    model.add("SUB-FIX", fix * 2)

    # no terminal, no --yes: the sub-agent's edit is asked for, and so denied
    proc = run_cli(agent_run(model, workspace, "MAIN: fix", "--settings", str(settings), yes=False))
    assert proc.returncode == 0, proc.stderr
    sub = model.requests_for("SUB-FIX")
    assert tool_names(sub[0]) == {"read_file", "edit_file", "run_command"}
    assert sub[0]["model"] == "sub-model" and model.requests_for("MAIN")[0]["model"] == "m"
    assert last_tool_results(sub[1])["e"].startswith("denied")
    assert "a - b" in (workspace / "calc.py").read_text()

    proc = run_cli(agent_run(model, workspace, "MAIN: fix", "--settings", str(settings)))
    assert proc.returncode == 0, proc.stderr
    assert "a + b" in (workspace / "calc.py").read_text()
    assert report_of(proc.stdout)["editedFiles"] == [(workspace / "calc.py").resolve().as_uri()]


def test_in_plan_mode_an_agent_gets_no_writer(model, workspace, home):
    agents(workspace, home)
    model.add("MAIN", [tools_reply(call("delegate", id="d", task="SUB-PLAN look", agent="fixer")), {"text": "1. plan"}])
    model.add("SUB-PLAN", [{"text": "looked"}])
    proc = run_cli(agent_run(model, workspace, "MAIN: plan it", "--mode", "plan"))
    assert proc.returncode == 0, proc.stderr
    assert tool_names(model.requests_for("SUB-PLAN")[0]) == {"read_file"}


def test_without_agent_files_delegate_is_unchanged(model, workspace, home):
    model.add([{"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, "hello"))
    assert proc.returncode == 0, proc.stderr
    schema = delegate_schema(model.requests[0])
    assert list(schema["parameters"]["properties"]) == ["task"]


def test_a_sub_agent_cannot_start_a_background_process(model, workspace, home):
    """Decision 86: the background processes are the main agent's; a sub-agent with `Bash` runs
    commands, never in the background."""
    agents(workspace, home)
    model.add("MAIN", [tools_reply(call("delegate", id="d", task="SUB-BG serve it", agent="fixer")), {"text": "ok"}])
    model.add("SUB-BG", [tools_reply(call("run_command", id="b", command="sleep 30", background=True)), {"text": "could not"}])
    proc = run_cli(agent_run(model, workspace, "MAIN: serve"))

    assert proc.returncode == 0, proc.stderr
    sub = model.requests_for("SUB-BG")
    assert not {"process_output", "stop_process"} & tool_names(sub[0])
    assert "background processes are not available here" in last_tool_results(sub[1])["b"]
    assert "processes" not in report_of(proc.stdout)
