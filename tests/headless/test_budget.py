"""Issue 24 / Decision 36: `budget.maxCostUsd` and `agent-lsp run --max-budget-usd`, end to end
through the real CLI against the scripted server (its replies carry `usage`, priced by `pricing`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.endpoints import litellm
from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(60)

# $100 per million prompt tokens, 1000 prompt tokens a call: each call costs $0.10.
PRICING = {"m": {"inputPerMTok": 100, "outputPerMTok": 0}}
USAGE = {"prompt_tokens": 1000, "completion_tokens": 20}


def settings_file(tmp_path: Path, **settings) -> str:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    return str(path)


def test_the_run_stops_right_after_the_call_that_reaches_the_budget(model, workspace, tmp_path):
    model.add([tools_reply(call("list_files"), text="looking", usage=USAGE, repeat=6)])
    # The flag beats the settings file's budget.
    settings = settings_file(tmp_path, pricing=PRICING, budget={"maxCostUsd": 100})
    proc = run_cli(agent_run(model, workspace, "look", "--settings", settings, "--max-budget-usd", "0.25"))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopReason"] == "max_turns" and report["stopCause"] == "budget"
    # $0.10, $0.20, $0.30: the third call reached it, and none of that reply's calls ran.
    assert len(model.requests) == 3 and report["turns"] == 3 and report["toolCalls"] == 2
    assert report["usage"]["costUsd"] == pytest.approx(0.3)
    summary = report["summary"]
    assert "the budget was reached: $0.300 spent of $0.250 (budget.maxCostUsd)" in summary, summary
    assert "the last model call passed it by $0.050" in summary, summary


def test_a_budget_reached_exactly_says_no_more(model, workspace, tmp_path):
    model.add([tools_reply(call("list_files"), usage=USAGE, repeat=4)])
    settings = settings_file(tmp_path, pricing=PRICING, budget={"maxCostUsd": 0.2})
    proc = run_cli(agent_run(model, workspace, "look", "--settings", settings))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopCause"] == "budget" and len(model.requests) == 2
    assert "$0.200 spent of $0.200" in report["summary"] and "passed it" not in report["summary"]


def test_a_sub_agents_calls_count_and_stop_the_run(model, workspace, tmp_path):
    model.add([
        tools_reply(call("delegate", id="d", task="list the files"), usage=USAGE),  # main: $0.10
        tools_reply(call("list_files"), usage=USAGE),  # sub-agent: $0.20
        tools_reply(call("list_files"), usage=USAGE),  # sub-agent: $0.30, the budget
        {"text": "never asked", "usage": USAGE},
    ])
    settings = settings_file(tmp_path, pricing=PRICING)
    proc = run_cli(agent_run(model, workspace, "delegate it", "--settings", settings, "--max-budget-usd", "0.25",
                             "--output-format", "stream-json", json_report=False))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    report = lines[-1]["report"]
    assert report["stopReason"] == "max_turns" and report["stopCause"] == "budget"
    assert len(model.requests) == 3, "no model call after the sub-agent's call reached the budget"
    assert "a call of sub-agent main/1" in report["summary"], report["summary"]
    usage = [e for e in lines if e.get("type") == "usage"]
    assert [e["agentId"] for e in usage] == ["main", "main/1", "main/1"]
    assert all(e["budgetUsd"] == 0.25 for e in usage)
    assert usage[-1]["costUsd"] == pytest.approx(0.3)


def test_a_budget_without_a_price_is_refused_before_the_first_call(model, workspace, tmp_path):
    settings = settings_file(tmp_path, pricing={"other-model": PRICING["m"]})
    proc = run_cli(agent_run(model, workspace, "anything", "--settings", settings, "--max-budget-usd", "1"))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "budget.maxCostUsd" in proc.stderr and "`m`" in proc.stderr and "pricing" in proc.stderr
    assert model.requests == [] and proc.stdout == ""


def test_a_budget_with_stream_usage_off_is_refused(model, workspace, tmp_path):
    settings = settings_file(tmp_path, pricing=PRICING, streamUsage=False, budget={"maxCostUsd": 1})
    proc = run_cli(agent_run(model, workspace, "anything", "--settings", settings))

    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "budget.maxCostUsd" in proc.stderr and "streamUsage is false" in proc.stderr
    assert model.requests == []


def test_a_reply_without_usage_stops_a_budgeted_run(model, workspace, tmp_path):
    """With a budget, a call whose cost cannot be known ends the run: the limit cannot be kept."""
    model.add([{"raw": litellm.ARGUMENTS_EMPTY}, {"text": "never asked"}])  # a list_files call, no usage
    settings = settings_file(tmp_path, pricing=PRICING)
    proc = run_cli(agent_run(model, workspace, "look", "--settings", settings, "--max-budget-usd", "1"))

    assert proc.returncode == 3, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert report["stopCause"] == "budget" and len(model.requests) == 1
    assert "reported no usage" in report["summary"] and report["toolCalls"] == 0


@pytest.mark.parametrize("bad", ["lots", "0", "-1", "nan", "inf"])
def test_a_bad_budget_flag_is_a_usage_error(model, workspace, bad):
    proc = run_cli([*agent_run(model, workspace, "anything"), f"--max-budget-usd={bad}"])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "argument --max-budget-usd:" in proc.stderr, proc.stderr
    assert model.requests == []
