"""Telemetry keeps what is not its to export or to hand on (issue 32: P13, P15, and a traces-only
backend): without `logContent` an approval rule's text (a command, a path) is not exported, only
its kind; the standard `OTEL_<SIGNAL>_EXPORTER=none` variables are honoured (no request of that
signal at all); the telemetry backend's credentials (the OTLP headers, an endpoint URL with a
password) reach no child and no workspace-declared MCP server, and `doctor` does not print them.
The real CLI as a subprocess, exporting to a real OTLP/HTTP receiver started here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lsp.mcp.config import from_user_settings
from agent_lsp.testing.otlp import OtlpReceiver
from tests.headless.test_telemetry import HEADER_SECRET, by_name, otel_env, run_agent
from tests.reliability.test_key_children import declare, start_all
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)

ARGUMENT = "rule-argument-2718"  # in the command and in the rule that allows it
PASSWORD = "endpoint-password-1618"
PROBE = ("import os\nfor k, v in sorted(os.environ.items()):\n"
         "    if k.startswith('OTEL_') or 'password' in v: print('ENV', k, v)\nprint('probe done')\n")


def one_command(model, workspace: Path, command: str) -> None:
    model.add("MAIN", [tools_reply(call("run_command", id="cmd", command=command)), {"text": "All done."}])


def command_output(model) -> str:
    return [m["content"] for m in model.requests_for("MAIN")[-1]["messages"] if m.get("tool_call_id") == "cmd"][0]


def doctor_checks(model, workspace: Path, env: dict[str, str]) -> dict[str, dict]:
    doctor = subprocess.run([sys.executable, "-m", "agent_lsp", "doctor", "--workspace", str(workspace),
                             "--base-url", model.base_url, "--model", "m", "--json"],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env)
    assert PASSWORD not in doctor.stdout + doctor.stderr
    return {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}


# -- P13: an approval rule's text is content -----------------------------------------------------
@pytest.mark.parametrize("log_content", [False, True])
def test_an_approval_rule_s_text_is_exported_only_with_log_content(model, workspace, tmp_path, log_content):
    with OtlpReceiver() as receiver:
        one_command(model, workspace, f"echo {ARGUMENT}")
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"telemetry": {"enabled": True, "logContent": log_content},
                                        "permissions": {"allow": [f"Bash(echo {ARGUMENT})"]}}))
        proc = run_agent(model, workspace, otel_env(receiver, enabled=False, AGENT_LSP_SETTINGS=str(settings)))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert receiver.wait(lambda: by_name(receiver.spans(), "execute_tool run_command"))
        command = by_name(receiver.spans(), "execute_tool run_command")[0]
        approval = dict(command.events)["agent_lsp.approval"]
        assert approval["agent_lsp.approval.decision"] == "allow" and approval["agent_lsp.approval.by_policy"] is True
        if log_content:  # the user asked for content: the rule's text goes too
            assert ARGUMENT in approval["agent_lsp.approval.rule"], approval
        else:
            assert ARGUMENT.encode() not in receiver.raw(), "no command text anywhere in the export"
            assert "agent_lsp.approval.rule" not in approval, approval
        assert approval["agent_lsp.approval.rule_kind"] == "allow_rule", approval  # what decided, always


# -- the standard OTEL_<SIGNAL>_EXPORTER variables ----------------------------------------------------
@pytest.mark.parametrize("metrics", ["otlp", "none"])
def test_a_traces_only_backend_gets_no_metrics_with_otel_metrics_exporter_none(model, workspace, metrics):
    with OtlpReceiver(refuse=("/v1/metrics",)) as receiver:  # answers 405 to metrics, as Jaeger does
        one_command(model, workspace, "echo hi")
        proc = run_agent(model, workspace, otel_env(receiver, OTEL_METRICS_EXPORTER=metrics))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert receiver.wait(lambda: by_name(receiver.spans(), "execute_tool run_command")), receiver.bodies
        if metrics == "otlp":  # the friction as reported: the test can fail
            assert receiver.refused and "Failed to export metrics" in proc.stderr, proc.stderr
        else:
            assert receiver.refused == [] and not receiver.points()
            assert "Failed to export" not in proc.stderr, proc.stderr
            check = doctor_checks(model, workspace, otel_env(receiver, OTEL_METRICS_EXPORTER=metrics))["telemetry"]
            assert check["ok"] and check["detail"].endswith("not exported: metrics (OTEL_*_EXPORTER=none)"), check


def test_otel_traces_exporter_none_exports_metrics_only(model, workspace):
    with OtlpReceiver() as receiver:
        one_command(model, workspace, "echo hi")
        proc = run_agent(model, workspace, otel_env(receiver, OTEL_TRACES_EXPORTER="none"))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert receiver.wait(lambda: receiver.points("gen_ai.client.token.usage")), receiver.bodies
        assert [path for path, _ in receiver.bodies if path == "/v1/traces"] == []


# -- P15: the backend's credentials stay ours -------------------------------------------------------
def test_no_child_gets_the_exporter_s_headers_or_an_endpoint_with_a_password(model, workspace):
    with OtlpReceiver() as receiver:
        (workspace / "probe.py").write_text(PROBE)
        one_command(model, workspace, f"{sys.executable} probe.py")
        with_password = receiver.endpoint.replace("http://", f"http://collector:{PASSWORD}@")
        env = otel_env(receiver, OTEL_EXPORTER_OTLP_ENDPOINT=with_password, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=with_password + "/v1/traces",
                       OTEL_EXPORTER_OTLP_METRICS_HEADERS=f"x-metrics={HEADER_SECRET}", COPIED_TOKEN=f"token {PASSWORD}")
        proc = run_agent(model, workspace, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        output = command_output(model)
        assert "probe done" in output, output
        assert PASSWORD not in output and HEADER_SECRET not in output, output
        assert receiver.wait(lambda: receiver.spans()), "the exporter itself still uses them"
        assert any(h.get("authorization", "").startswith("Basic ") for h in receiver.headers), receiver.headers

        check = doctor_checks(model, workspace, env)["telemetry"]
        assert PASSWORD not in json.dumps(check) and "[credentials hidden]@127.0.0.1" in check["detail"], check


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                                      "OTEL_EXPORTER_OTLP_ENDPOINT", "COPIED"])
async def test_a_workspace_mcp_server_never_gets_the_backend_s_credentials(workspace, tmp_path, variable):
    dump = tmp_path / "dump.jsonl"
    script = tmp_path / "dump_env.py"
    script.write_text("import json, os, sys\nopen(sys.argv[1], 'a').write(json.dumps(dict(os.environ)) + '\\n')\n")
    env = {"PATH": "/usr/bin:/bin", "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{HEADER_SECRET}",
           "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"x-token={HEADER_SECRET}",
           "OTEL_EXPORTER_OTLP_ENDPOINT": f"https://collector:{PASSWORD}@otel.example:4318",
           "COPIED": f"Bearer {HEADER_SECRET}"}
    server = {"command": sys.executable, "args": [str(script), str(dump)], "env": {"GIVEN": "${env:" + variable + "}"}}
    status = await start_all(declare(workspace, {"ws": server}), workspace, env)
    assert status[0]["state"] == "failed", status
    assert variable in status[0]["error"] or "GIVEN" in status[0]["error"], status
    assert "telemetry backend's credentials" in status[0]["error"], status
    assert HEADER_SECRET not in json.dumps(status) and PASSWORD not in json.dumps(status)
    assert not dump.exists(), "the server was not started at all"

    # the user's own server may be given them by name; it still inherits none of them
    decls = from_user_settings({"mine": server})[0]
    await start_all(decls, workspace, env)
    seen = json.loads(dump.read_text().splitlines()[0])
    assert HEADER_SECRET in seen["GIVEN"] or PASSWORD in seen["GIVEN"]
    inherited = {k: v for k, v in seen.items() if k != "GIVEN"}
    assert HEADER_SECRET not in json.dumps(inherited) and PASSWORD not in json.dumps(inherited), inherited
