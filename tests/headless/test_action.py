"""The GitHub Action (`action.yml`, CONTRACT "Headless at scale", Decision 44) executed locally as
the runner would: its steps' `${{ }}` expressions evaluated, each `run:` script run with the
composite shell (`bash --noprofile --norc -eo pipefail`), a fresh `GITHUB_OUTPUT` per step read
back into `steps.<id>.outputs`, `GITHUB_WORKSPACE` / `RUNNER_TEMP` temp folders, and the action's
outputs evaluated from them, against the scripted model.

Two steps do not run here: `install` (its output `python` is given: a shim around this
interpreter that records every command line it is started with) and `sandbox-host` (apt-get and
sysctl need root); the latter's `if:` is evaluated and asserted instead."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
ACTION_KEY = "sk-action-input-key-0987654321"
NOT_RUN_HERE = ("install", "sandbox-host")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap is not installed")


# --- a small evaluator of the expressions the action uses -------------------------------------

def evaluate(expr: str, contexts: dict[str, Any]) -> Any:
    """`a || b`, `a && b`, `x == 'y'`, `x != 'y'`, 'literals' and context paths, with the
    runner's semantics (|| and && return an operand; '' is falsy; comparisons of strings are
    case-insensitive)."""
    expr = expr.strip()
    for op in ("||", "&&"):
        parts = _split(expr, op)
        if len(parts) > 1:
            values = [evaluate(p, contexts) for p in parts]
            if op == "||":
                return next((v for v in values if v), values[-1])
            return next((v for v in values if not v), values[-1])
    for op in ("==", "!="):
        parts = _split(expr, op)
        if len(parts) == 2:
            left, right = (str(evaluate(p, contexts)).lower() for p in parts)
            return (left == right) == (op == "==")
    if expr.startswith("'") and expr.endswith("'"):
        return expr[1:-1].replace("''", "'")
    value: Any = contexts
    for name in expr.split("."):
        value = value.get(name, "") if isinstance(value, dict) else ""
    return value


def _split(expr: str, op: str) -> list[str]:
    parts, quoted, start, i = [], False, 0, 0
    while i < len(expr):
        if expr[i] == "'":
            quoted = not quoted
        elif not quoted and expr.startswith(op, i):
            parts.append(expr[start:i])
            start = i = i + len(op)
            continue
        i += 1
    return [*parts, expr[start:]]


def substitute(text: str, contexts: dict[str, Any]) -> str:
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(evaluate(m.group(1), contexts)), text)


def parse_output_file(text: str) -> dict[str, str]:
    """`$GITHUB_OUTPUT` as the runner reads it: `name=value` and `name<<DELIM` ... `DELIM`."""
    values, lines = {}, text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            while lines[i] != delimiter:
                body.append(lines[i])
                i += 1
            i += 1
            values[name] = "\n".join(body)
        else:
            name, value = line.split("=", 1)
            values[name] = value
    return values


@dataclass
class ActionRun:
    outputs: dict[str, str]
    step_outputs: dict[str, str] = field(default_factory=dict)  # raw $GITHUB_OUTPUT text per step
    scripts: dict[str, str] = field(default_factory=dict)  # each step's script, as run
    log: str = ""  # every step's stdout and stderr
    stdout: str = ""
    skipped: list[str] = field(default_factory=list)
    would_run: dict[str, bool] = field(default_factory=dict)
    argv: list[list[str]] = field(default_factory=list)  # every command line the python shim saw
    returncode: int = 0


def run_action(tmp: Path, workspace: Path, inputs: dict[str, str], job_env: dict[str, str] | None = None) -> ActionRun:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    given = {}
    for name, spec in action["inputs"].items():
        if spec.get("required") and name not in inputs:
            raise AssertionError(f"input {name} is required")
        given[name] = inputs.get(name, str(spec.get("default", "")))
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    argv_log = tmp / "argv.jsonl"
    shim = tmp / "python-shim"
    shim.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"with open({str(argv_log)!r}, 'a') as f: f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
                    f"os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])\n")
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "AGENT_LSP_STATE_DIR")}
    env.update(job_env or {})
    contexts: dict[str, Any] = {
        "inputs": given, "env": env, "runner": {"os": "Linux", "temp": str(runner_temp)},
        "github": {"action_path": str(ROOT), "workspace": str(workspace)},
        "steps": {"install": {"outputs": {"python": str(shim)}}},
    }
    result = ActionRun(outputs={})
    for step in action["runs"]["steps"]:
        sid = step["id"]
        runs = bool(evaluate(step["if"], contexts)) if "if" in step else True
        if sid in NOT_RUN_HERE:
            result.skipped.append(sid)
            result.would_run[sid] = runs
            continue
        assert runs, f"step {sid} is skipped"
        assert step["shell"] == "bash"
        script = substitute(step["run"], contexts)
        result.scripts[sid] = script
        output_file = tmp / f"output-{sid}"
        output_file.write_text("")
        step_env = {**env, "GITHUB_OUTPUT": str(output_file), "GITHUB_WORKSPACE": str(workspace),
                    "RUNNER_TEMP": str(runner_temp), "RUNNER_OS": "Linux", "GITHUB_ACTION_PATH": str(ROOT),
                    "GITHUB_ACTIONS": "true"}
        step_env.update({k: str(substitute(str(v), contexts)) for k, v in (step.get("env") or {}).items()})
        script_file = tmp / f"step-{sid}.sh"
        script_file.write_text(script)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)],
                              cwd=workspace, env=step_env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=75)
        result.log += proc.stdout + proc.stderr
        result.stdout += proc.stdout
        result.step_outputs[sid] = output_file.read_text()
        contexts["steps"][sid] = {"outputs": parse_output_file(result.step_outputs[sid])}
        if proc.returncode != 0:
            result.returncode = proc.returncode
            break
    result.outputs = {name: substitute(spec["value"], contexts) for name, spec in action["outputs"].items()}
    if argv_log.exists():
        result.argv = [json.loads(line) for line in argv_log.read_text().splitlines()]
    return result


@pytest.fixture
def repo(workspace: Path) -> Path:
    """The workspace as actions/checkout leaves it: a git repository with a clean tree."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=workspace, check=True)
    subprocess.run([*git, "add", "-A"], cwd=workspace, check=True)
    subprocess.run([*git, "commit", "-qm", "checkout"], cwd=workspace, check=True)
    return workspace


def changed(repo: Path) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True).stdout
    return sorted(line[3:] for line in out.splitlines())


def assert_no_key(run: ActionRun, tmp: Path) -> None:
    """The key is in no command line, script, settings file, output, or log line (except the one
    `::add-mask::` command the runner consumes)."""
    assert ACTION_KEY not in json.dumps(run.argv)
    assert ACTION_KEY not in json.dumps(run.scripts) and ACTION_KEY not in json.dumps(run.step_outputs)
    assert ACTION_KEY not in json.dumps(run.outputs)
    masked = [line for line in run.log.splitlines() if ACTION_KEY in line]
    assert masked == [f"::add-mask::{ACTION_KEY}"]
    assert run.stdout.count(f"::add-mask::{ACTION_KEY}") == 1
    for path in (tmp / "runner-temp").rglob("*"):
        if path.is_file() and path.suffix in (".json", ".jsonl", ".md", ".txt", ""):
            assert ACTION_KEY not in path.read_text(errors="replace"), path


@needs_bwrap
def test_sandboxed_run_edits_runs_a_command_and_fills_the_outputs(model, repo, tmp_path):
    outside = Path("/var/tmp") / f"agent-lsp-action-{uuid.uuid4().hex}"  # not /tmp: private in the sandbox
    model.add([
        tools_reply(call("edit_file", id="e", path="calc.py", old_text="return a - b", new_text="return a + b"),
                    call("write_file", id="w", path="notes/fix.md", content="fixed add\n")),
        tools_reply(call("run_command", id="c", command="touch made-by-command.txt && echo ran inside && env"),
                    call("run_command", id="x", command=f"touch {outside}"),
                    call("remember", id="r", note="add() subtracted")),
        {"text": "Fixed add().\nIt subtracted."},
    ])
    run = run_action(tmp_path, repo, {"prompt": "--fix add, it subtracts", "api-key": ACTION_KEY,
                                      "base-url": model.base_url, "model": "m", "max-turns": "6"})

    assert run.returncode == 0, run.log
    assert run.would_run == {"install": True, "sandbox-host": True}
    # The edits and the sandboxed command's file are left in the working tree, uncommitted.
    assert changed(repo) == ["calc.py", "made-by-command.txt", "notes/"]
    assert "return a + b" in (repo / "calc.py").read_text()
    results = {m["tool_call_id"]: m["content"] for m in model.requests[2]["messages"] if m["role"] == "tool"}
    assert results["c"].startswith("exit code 0") and "ran inside" in results["c"]
    assert "INPUT_PROMPT=" in results["c"] and ACTION_KEY not in results["c"], "commands never see the key"
    # The commands ran without asking because they ran in the sandbox, where only the workspace
    # is writable.
    assert not results["x"].startswith(("exit code 0", "denied")) and not outside.exists()
    records = [json.loads(line) for line in Path(json.loads(Path(run.outputs["report"]).read_text())["transcript"]).read_text().splitlines()]
    assert "approval.sandboxed" in json.dumps(records)
    assert results["r"].startswith("denied"), "a side effect outside the sandbox and the edits is denied"
    assert not (repo / ".agent-lsp" / "memory.md").exists()
    # The prompt went in whole (from stdin: a leading -- is not an option).
    assert model.requests[0]["messages"][-1]["content"].startswith("--fix add, it subtracts")
    # The outputs: the report under RUNNER_TEMP, the final text and the edited files, the
    # multi-line ones in the delimiter form with a random delimiter.
    report_path = Path(run.outputs["report"])
    assert report_path.is_relative_to(tmp_path / "runner-temp")
    report = json.loads(report_path.read_text())
    assert report["stopReason"] == "done" and report["finalText"] == "Fixed add().\nIt subtracted."
    assert Path(report["transcript"]).is_relative_to(tmp_path / "runner-temp")
    assert run.outputs["final-text"] == "Fixed add().\nIt subtracted."
    # (a file a command made counts as edited too: the report's editedFiles)
    assert sorted(run.outputs["edited-files"].splitlines()) == ["calc.py", "made-by-command.txt", "notes/fix.md"]
    raw = run.step_outputs["run"]
    delimiters = re.findall(r"^(?:final-text|edited-files)<<(\S+)$", raw, re.M)
    assert len(delimiters) == 2 and len(set(delimiters)) == 2 and all(len(d) > 30 for d in delimiters)
    assert f"report={report_path}\n" in raw
    # The key reached the endpoint through OPENAI_API_KEY, and nowhere else.
    assert model.authorizations == [f"Bearer {ACTION_KEY}"] * 3
    assert_no_key(run, tmp_path)
    # agent-lsp was started with the settings file, the prompt on stdin.
    started = next(a for a in run.argv if a[:3] == ["-m", "agent_lsp", "run"])
    assert started[3] == "-" and "--settings" in started and "--output-format" in started
    settings = json.loads(Path(started[started.index("--settings") + 1]).read_text())
    assert settings["approval"] == {"default": "deny", "sandboxed": "allow",
                                    "tools": {"edit_file": "allow", "write_file": "allow",
                                              "rename_symbol": "allow", "run_command": "ask"}}
    assert settings["sandbox"] == {"mode": "workspace-write"} and settings["maxTurns"] == 6
    assert "budget" not in settings, "budget.maxCostUsd only when max-budget-usd is given"


def test_without_the_sandbox_no_command_runs_and_edits_still_apply(model, repo, tmp_path):
    model.add([
        tools_reply(call("run_command", id="c", command="touch should-not-exist.txt"),
                    call("edit_file", id="e", path="calc.py", old_text="return a - b", new_text="return a + b")),
        {"text": "Edited; the command was denied."},
    ])
    run = run_action(tmp_path, repo, {"prompt": "fix add", "sandbox": "off", "base-url": model.base_url},
                     job_env={"OPENAI_API_KEY": ACTION_KEY})

    assert run.returncode == 0, run.log
    assert run.would_run["sandbox-host"] is False, "no apt-get or sysctl with the sandbox off"
    assert not (repo / "should-not-exist.txt").exists()
    results = {m["tool_call_id"]: m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"}
    assert results["c"].startswith("denied: the policy denies it")
    assert results["e"].startswith("applied: edit calc.py")
    assert changed(repo) == ["calc.py"]
    assert run.outputs["edited-files"] == "calc.py" and run.outputs["final-text"] == "Edited; the command was denied."
    # The job's own OPENAI_API_KEY is used when the input is empty; still never shown.
    assert model.authorizations == [f"Bearer {ACTION_KEY}"] * 2
    assert_no_key(run, tmp_path)


def test_a_failed_run_still_writes_its_outputs_and_fails_the_step(model, repo, tmp_path):
    model.add([{"status": 500, "message": "the model is down", "retry_after": 0.01, "repeat": 3}])
    schema = '{"type": "object", "required": ["ok"]}'
    run = run_action(tmp_path, repo, {"prompt": "anything", "sandbox": "off", "base-url": model.base_url,
                                      "api-key": ACTION_KEY, "output-schema": schema})

    assert run.returncode == 1, run.log
    report = json.loads(Path(run.outputs["report"]).read_text())
    assert report["stopReason"] == "fatal"
    assert run.outputs["final-text"] == "" and run.outputs["edited-files"] == ""
    started = next(a for a in run.argv if a[:3] == ["-m", "agent_lsp", "run"])
    assert json.loads(Path(started[started.index("--output-schema") + 1]).read_text()) == json.loads(schema)


def test_a_budget_stops_the_run_with_the_workflows_prices(model, repo, tmp_path):
    """max-budget-usd end to end (Decision 36): the price comes from the workflow's own settings
    file (AGENT_LSP_SETTINGS in the job's env), the run stops right after the call that reaches it."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 10}  # $0.10 a call at $100 per MTok
    model.add([tools_reply(call("list_files"), usage=usage, repeat=4)])
    workflow_settings = tmp_path / "workflow-settings.json"
    workflow_settings.write_text(json.dumps({"pricing": {"m": {"inputPerMTok": 100, "outputPerMTok": 0}},
                                             "approval": {"default": "allow"}}))
    run = run_action(tmp_path, repo, {"prompt": "look around", "sandbox": "off", "base-url": model.base_url,
                                      "model": "m", "max-budget-usd": "0.15"},
                     job_env={"OPENAI_API_KEY": ACTION_KEY, "AGENT_LSP_SETTINGS": str(workflow_settings)})

    assert run.returncode == 3, run.log
    report = json.loads(Path(run.outputs["report"]).read_text())
    assert report["stopReason"] == "max_turns" and report["stopCause"] == "budget"
    assert len(model.requests) == 2 and "the budget was reached: $0.200 spent of $0.150" in report["summary"]
    started = next(a for a in run.argv if a[:3] == ["-m", "agent_lsp", "run"])
    settings = json.loads(Path(started[started.index("--settings") + 1]).read_text())
    assert settings["budget"] == {"maxCostUsd": 0.15}
    assert settings["pricing"] == {"m": {"inputPerMTok": 100, "outputPerMTok": 0}}
    assert settings["approval"]["default"] == "deny", "only the prices are taken from the workflow's file"
    assert_no_key(run, tmp_path)


def test_a_budget_without_a_price_fails_the_step_before_the_model(model, repo, tmp_path):
    run = run_action(tmp_path, repo, {"prompt": "x", "sandbox": "off", "base-url": model.base_url, "model": "m",
                                      "max-budget-usd": "1"}, job_env={"OPENAI_API_KEY": ACTION_KEY})
    assert run.returncode == 2, run.log
    assert "budget.maxCostUsd" in run.log and model.requests == []


def test_settings_from_the_inputs(monkeypatch, tmp_path):
    """Not run against the model: a budget needs a price for the model (Decision 36)."""
    from agent_lsp.action import ActionError, settings_from_inputs, write_settings

    monkeypatch.setenv("INPUT_MAX_BUDGET_USD", "0.5")
    monkeypatch.setenv("INPUT_SANDBOX", "read-only")
    monkeypatch.setenv("INPUT_OUTPUT_SCHEMA", "schemas/answer.json")
    settings = settings_from_inputs()
    assert settings["budget"] == {"maxCostUsd": 0.5} and settings["sandbox"] == {"mode": "read-only"}
    assert settings["approval"]["tools"]["run_command"] == "ask" and settings["mcp"] == {"workspaceServers": "deny"}
    assert "model" not in settings and "baseUrl" not in settings and "maxTurns" not in settings
    written = parse_output_file(write_settings(tmp_path / "out", tmp_path / "ws"))
    assert written == {"settings": str(tmp_path / "out" / "settings.json"),
                       "output-schema": str(tmp_path / "ws" / "schemas" / "answer.json")}
    for name, bad in (("INPUT_MAX_BUDGET_USD", "lots"), ("INPUT_MAX_BUDGET_USD", "0"), ("INPUT_MAX_TURNS", "0")):
        with monkeypatch.context() as m:
            m.setenv(name, bad)
            with pytest.raises(ActionError):
                settings_from_inputs()


def test_a_bad_input_stops_before_the_run(model, repo, tmp_path):
    run = run_action(tmp_path, repo, {"prompt": "x", "sandbox": "everything", "base-url": model.base_url})
    assert run.returncode == 2 and "run" not in run.scripts
    assert "::error title=agent-lsp action::sandbox must be one of" in run.log
    assert model.requests == []


def test_no_input_is_spliced_into_a_script():
    """Inputs reach the scripts only through `env:` (script injection: a comment's text as the
    prompt must never become bash)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    for step in action["runs"]["steps"]:
        assert "inputs." not in step["run"], step["id"]
        for expression in re.findall(r"\$\{\{(.*?)\}\}", step["run"]):
            assert expression.strip() == "github.action_path", step["id"]
    install = next(s for s in action["runs"]["steps"] if s["id"] == "install")
    assert re.search(r'pip" install [-a-z ]*"\$\{\{ github.action_path \}\}"\n', install["run"])
    host = next(s for s in action["runs"]["steps"] if s["id"] == "sandbox-host")
    assert "apt-get install -y -qq bubblewrap" in host["run"]
    assert "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in host["run"]
    assert set(action["inputs"]) == {"prompt", "model", "base-url", "api-key", "sandbox", "max-turns",
                                     "max-budget-usd", "output-schema"}
    assert action["inputs"]["sandbox"]["default"] == "workspace-write" and action["inputs"]["prompt"]["required"]
    assert set(action["outputs"]) == {"report", "final-text", "edited-files"}


def test_the_example_workflow_uses_the_action_and_checks_the_commenter():
    text = (ROOT / "examples" / "github" / "agent.yml").read_text()
    workflow = yaml.safe_load(text)
    triggers = workflow.get("on", workflow.get(True))  # PyYAML reads a bare `on` key as True
    assert set(triggers) >= {"issue_comment", "workflow_dispatch"}
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    uses = [s.get("uses", "") for s in steps]
    checkout = next(s for s in steps if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["persist-credentials"] is False, "no token in .git/config for the run"
    agent = next(s for s in steps if "agent-lsp" in s.get("uses", ""))
    assert agent["with"]["prompt"] and "secrets." in agent["with"]["api-key"]
    assert any(u.startswith("peter-evans/create-pull-request@") for u in uses)
    condition = " ".join(str(job.get("if", "")) for job in workflow["jobs"].values())
    for association in ("OWNER", "MEMBER", "COLLABORATOR"):
        assert association in condition
    assert "author_association" in condition
    # No hand-written GitHub API calls, no comment text spliced into a script.
    for step in steps:
        script = step.get("run", "")
        assert "api.github.com" not in script and "github.event.comment" not in script


def test_output_lines_use_a_fresh_delimiter_the_value_does_not_hold():
    from agent_lsp.action import output_lines, relative_paths

    assert output_lines("report", "/tmp/r.json") == "report=/tmp/r.json\n"
    first, second = output_lines("t", "a\nb"), output_lines("t", "a\nb")
    assert first != second and parse_output_file(first) == {"t": "a\nb"}
    assert relative_paths(["file:///w/a%20b.py", "file:///elsewhere/x"], Path("/w")) == ["a b.py", "/elsewhere/x"]


TOKEN_HEADER = "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldHRva2VuMTIz"


def test_git_internals_are_never_edited_and_the_checkout_token_never_reaches_the_model(model, repo, tmp_path):
    """Issue 32 P2 / Decision 62, under the Action's settings (edits allowed, no one to ask):
    an edit of any `.git` (the checkout's, a nested repository's; through `sub/..`, `//` or a
    symlink) is refused saying why, and the token actions/checkout persists in .git/config is
    shown to the model by no read, search or listing."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "config", "http.https://github.com/.extraheader", TOKEN_HEADER], cwd=repo, check=True)
    subprocess.run(["git", "config", "remote.origin.url", "https://x-access-token:ghs_urltoken123@github.com/o/r"],
                   cwd=repo, check=True)
    inner = repo / "sub" / "inner"
    inner.mkdir(parents=True)
    subprocess.run([*git, "init", "-q"], cwd=inner, check=True)
    (repo / "gitcfg").symlink_to(repo / ".git" / "config")
    before = {p: p.read_bytes() for p in [repo / ".git" / "config", inner / ".git" / "config",
                                         repo / ".git" / "info" / "exclude"]}
    plant = "[core]\n\tfsmonitor = touch /tmp/pwned\n"
    model.add([
        tools_reply(call("edit_file", id="e1", path=".git/config", old_text="[core]", new_text=plant),
                    call("write_file", id="w1", path="sub/../.git/hooks/pre-commit", content="#!/bin/sh\nid\n"),
                    call("write_file", id="w2", path=".git//info/exclude", content="*\n"),
                    call("write_file", id="w3", path="sub/inner/.git/config", content=plant),
                    call("edit_file", id="e2", path="gitcfg", old_text="[core]", new_text=plant),
                    call("write_file", id="w4", path=".GIT/config", content=plant),
                    call("edit_file", id="ok", path="calc.py", old_text="return a - b", new_text="return a + b")),
        tools_reply(call("read_file", id="r", path=".git/config"),
                    call("search", id="s1", pattern="AUTHORIZATION|ghs_", path=".git"),
                    call("search", id="s2", pattern="AUTHORIZATION|ghs_", path="sub/../.git/config"),
                    call("search", id="s3", pattern="AUTHORIZATION|ghs_"),
                    call("list_files", id="l", path=".git")),
        {"text": "done"},
    ])
    run = run_action(tmp_path, repo, {"prompt": "fix", "sandbox": "off", "base-url": model.base_url,
                                      "api-key": ACTION_KEY})

    assert run.returncode == 0, run.log
    assert {p: p.read_bytes() for p in before} == before, "no .git file changed"
    assert not (repo / ".git" / "hooks" / "pre-commit").exists() and not (repo / ".GIT").exists()
    assert "return a + b" in (repo / "calc.py").read_text(), "other edits still apply"
    edits = {m["tool_call_id"]: m["content"] for m in model.requests[1]["messages"] if m["role"] == "tool"}
    for call_id in ("e1", "w1", "w2", "w3", "e2", "w4"):
        assert edits[call_id].startswith("denied") and ".git folder" in edits[call_id], edits[call_id]
    reads = {m["tool_call_id"]: m["content"] for m in model.requests[2]["messages"] if m["role"] == "tool"}
    assert "extraheader = [redacted]" in reads["r"] and "https://[redacted]@github.com/o/r" in reads["r"]
    for call_id in ("s1", "s2", "l"):
        assert ".git folder" in reads[call_id] and "never" in reads[call_id], reads[call_id]
    blob = json.dumps(model.requests)
    assert "eC1hY2Nlc3MtdG9rZW46" not in blob, blob[blob.find("eC1hY2Nlc3MtdG9rZW46") - 600:][:800]
    assert "ghs_secret" not in blob and "ghs_urltoken" not in blob
