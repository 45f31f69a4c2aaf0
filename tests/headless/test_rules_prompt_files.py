"""Permission rules over prompt files through `agent-lsp run` (CONTRACT Decisions 28, 30): a
skill's file that a `Read(…)` deny rule covers is neither listed nor made readable."""

from __future__ import annotations

import json

import pytest

from tests.headless.test_prompt_files_cli import home, write  # noqa: F401 - the fixture
from tests.headless.test_run_cli import agent_run, run_cli
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(60)


def test_a_skill_file_a_read_deny_rule_covers_is_not_listed_nor_readable(model, workspace, home):  # noqa: F811
    skill = write(home / ".agents" / "skills" / "deploy" / "SKILL.md",
                  "---\nname: deploy\ndescription: Deploy the app.\n---\nRun scripts/go.sh.\n")
    script = write(skill.parent / "scripts" / "go.sh", "echo go\n")
    secret = write(skill.parent / "prod.env", "TOKEN=abc\n")
    write(home / ".claude" / "settings.json", json.dumps({"permissions": {"deny": ["Read(*.env)"]}}))
    model.add([
        tools_reply({"name": "skill", "id": "s", "arguments": {"name": "deploy"}}),
        tools_reply(call("read_file", id="r", path=str(secret.resolve())),
                    call("read_file", id="g", path=str(script.resolve()))),
        {"text": "ok"},
    ])
    proc = run_cli(agent_run(model, workspace, "deploy"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loaded = last_tool_results(model.requests[1])["s"]
    assert str(script.resolve()) in loaded and "prod.env" not in loaded, loaded
    read = last_tool_results(model.requests[2])
    assert "TOKEN" not in read["r"] and read["r"].startswith(("denied", "error")), read["r"]
    assert "echo go" in read["g"]
