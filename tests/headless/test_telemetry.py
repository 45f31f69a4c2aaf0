"""OpenTelemetry from `agent-lsp run` (CONTRACT "Headless at scale", Telemetry; Decision 43):
the real CLI as a subprocess, exporting to a real OTLP/HTTP receiver started here, decoded with
opentelemetry-proto."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_lsp.testing.otlp import OtlpReceiver, Span
from tests.headless.test_run_cli import agent_run, report_of
from tests.unit.kit import API_KEY, call, tools_reply

pytestmark = pytest.mark.timeout(90)

HEADER_SECRET = "otlp-header-secret-4711"
PROBE = "import os\nprint('TP=' + os.environ.get('TRACEPARENT', 'none'))\nprint('H=' + os.environ.get('OTEL_EXPORTER_OTLP_HEADERS', 'none'))\n"


@pytest.fixture
def receiver():
    with OtlpReceiver() as r:
        yield r


def otel_env(receiver: OtlpReceiver, enabled: bool = True, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "AGENT_LSP_ENABLE_TELEMETRY"}
    env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_HEADERS": f"x-token={HEADER_SECRET}",
                "OTEL_BSP_SCHEDULE_DELAY": "100", **more})
    if enabled:
        env["AGENT_LSP_ENABLE_TELEMETRY"] = "1"
    return env


def script_run_with_tools_and_a_delegate(model, workspace: Path) -> None:
    (workspace / "probe.py").write_text(PROBE)
    model.add("MAIN", [
        tools_reply(call("run_command", id="cmd", command=f"{sys.executable} probe.py"),
                    call("delegate", id="d1", task="SUB-A: who calls add?"), text="Checking. "),
        {"text": "All done."},
    ])
    model.add("SUB-A", [tools_reply(call("read_file", id="r1", path="calc.py")), {"text": "add is in calc.py"}])


def run_agent(model, workspace: Path, env: dict[str, str], task: str = "MAIN: look around") -> subprocess.CompletedProcess[str]:
    return subprocess.run(agent_run(model, workspace, task), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60, env=env)


def by_name(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s.name == name]


def children(spans: list[Span], parent: Span) -> list[str]:
    return sorted(s.name for s in spans if s.parent_id == parent.span_id)


def test_a_run_is_one_trace_with_model_tool_and_sub_agent_spans_and_metrics(model, workspace, receiver):
    script_run_with_tools_and_a_delegate(model, workspace)
    proc = run_agent(model, workspace, otel_env(receiver))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(proc.stdout)
    assert receiver.wait(lambda: len(receiver.spans()) >= 8 and receiver.points()), receiver.bodies

    spans = receiver.spans()
    assert {s.trace_id for s in spans} == {spans[0].trace_id}, "one trace per run"
    assert {s.scope for s in spans} == {"agent_lsp"}, "only our own spans are exported"
    root = [s for s in by_name(spans, "invoke_agent agent-lsp") if not s.parent_id]
    assert len(root) == 1
    run = root[0]
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "agent-lsp"
    assert run.attributes["gen_ai.conversation.id"] == report["sessionId"]
    assert run.attributes["agent_lsp.stop.reason"] == "done"
    assert run.resource["service.name"] == "agent-lsp"
    assert children(spans, run) == ["chat m", "chat m", "execute_tool delegate", "execute_tool run_command"]

    # the sub-agent nests under its delegate call, with its own model calls and tools
    delegate = by_name(spans, "execute_tool delegate")[0]
    sub = [s for s in spans if s.parent_id == delegate.span_id]
    assert [s.name for s in sub] == ["invoke_agent agent-lsp"]
    assert sub[0].attributes["gen_ai.agent.id"] == "main/1"
    assert children(spans, sub[0]) == ["chat m", "chat m", "execute_tool read_file"]

    chats = by_name(spans, "chat m")
    assert len(chats) == 4
    for chat in chats:
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == "m" and a["gen_ai.response.model"] == "m"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.conversation.id"] == report["sessionId"]
        assert chat.kind == 3  # SPAN_KIND_CLIENT
    assert sorted(c.attributes["gen_ai.response.finish_reasons"][0] for c in chats) == ["stop", "stop", "tool_calls", "tool_calls"]

    command = by_name(spans, "execute_tool run_command")[0]
    assert command.attributes["gen_ai.operation.name"] == "execute_tool"
    assert command.attributes["gen_ai.tool.name"] == "run_command"
    assert command.attributes["gen_ai.tool.call.id"] == "cmd"
    assert command.attributes["agent_lsp.approval.decision"] == "allow"
    assert command.attributes["agent_lsp.tool.outcome"] == "ok"
    assert [name for name, _ in command.events] == ["agent_lsp.approval"]
    assert command.events[0][1]["agent_lsp.approval.decision"] == "allow"

    # the command saw TRACEPARENT naming its own tool span, and not the exporter's headers
    output = [m["content"] for m in model.requests_for("MAIN")[1]["messages"] if m.get("tool_call_id") == "cmd"][0]
    traceparent = output.split("TP=")[1].split()[0]
    assert traceparent.startswith(f"00-{command.trace_id}-{command.span_id}-"), output
    assert int(traceparent[-2:], 16) & 1, "sampled"
    assert "H=none" in output and HEADER_SECRET not in output

    # metrics: token usage by type, and the duration of each model call
    tokens = receiver.points("gen_ai.client.token.usage")
    assert {p.attributes["gen_ai.token.type"] for p in tokens} == {"input", "output"}
    assert sum(p.count for p in tokens if p.attributes["gen_ai.token.type"] == "input") == 4
    assert sum(p.sum for p in tokens if p.attributes["gen_ai.token.type"] == "output") == sum(
        c.attributes["gen_ai.usage.output_tokens"] for c in chats)
    assert all(p.unit == "{token}" and p.attributes["gen_ai.provider.name"] == "openai" for p in tokens)
    durations = receiver.points("gen_ai.client.operation.duration")
    assert sum(p.count for p in durations) == 4 and durations[0].unit == "s"
    assert durations[0].attributes["gen_ai.operation.name"] == "chat"

    # no key anywhere, and no content unless asked
    raw = receiver.raw()
    assert API_KEY.encode() not in raw
    assert b"MAIN: look around" not in raw and b"add is in calc.py" not in raw and b"probe.py" not in raw
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system", "gen_ai.tool.call.arguments"))
                   for s in spans for k in s.attributes)
    assert all(h.get("x-token") == HEADER_SECRET for h in receiver.headers), "the exporter's own headers still go to it"


def test_content_is_recorded_only_with_log_content_and_never_the_key(model, workspace, receiver, tmp_path):
    script_run_with_tools_and_a_delegate(model, workspace)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"telemetry": {"enabled": True, "logContent": True}}))
    env = otel_env(receiver, enabled=False, AGENT_LSP_SETTINGS=str(settings))
    proc = run_agent(model, workspace, env, task=f"MAIN: look around (my key is {API_KEY})")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert receiver.wait(lambda: len(receiver.spans()) >= 8)

    spans = receiver.spans()
    first = [s for s in by_name(spans, "chat m") if "MAIN: look around" in s.attributes.get("gen_ai.input.messages", "")]
    assert len(first) == 2  # the main agent's two model calls
    messages = json.loads(first[0].attributes["gen_ai.input.messages"])
    assert messages[0]["role"] == "user"
    assert messages[0]["parts"][0]["content"] == "MAIN: look around (my key is [redacted])"
    assert "agent-lsp" in first[0].attributes["gen_ai.system_instructions"]
    outputs = [json.loads(s.attributes["gen_ai.output.messages"]) for s in by_name(spans, "chat m")]
    assert any(o[0]["parts"][0] == {"type": "text", "content": "All done."} for o in outputs)
    command = by_name(spans, "execute_tool run_command")[0]
    assert json.loads(command.attributes["gen_ai.tool.call.arguments"]) == {"command": f"{sys.executable} probe.py"}
    assert API_KEY.encode() not in receiver.raw()


IMPORTS = """
import runpy, sys
sys.argv = {argv!r}
try:
    runpy.run_module("agent_lsp", run_name="__main__")
except SystemExit:
    pass
import opentelemetry.trace as api
print("SDK=" + ",".join(sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter")))))
print("GLOBAL=" + type(api.get_tracer_provider()).__name__)
"""


@pytest.mark.parametrize("enabled", [False, True])
def test_with_telemetry_off_nothing_is_exported_and_nothing_of_the_sdk_is_imported(model, workspace, receiver, enabled):
    script_run_with_tools_and_a_delegate(model, workspace)
    argv = agent_run(model, workspace, "MAIN: look around")[3:]  # after `python -m agent_lsp`
    proc = subprocess.run([sys.executable, "-c", IMPORTS.format(argv=["agent-lsp", *argv])], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, env=otel_env(receiver, enabled=enabled))
    lines = dict(line.split("=", 1) for line in proc.stdout.splitlines() if line.startswith(("SDK=", "GLOBAL=")))
    assert '"stopReason": "done"' in proc.stdout, proc.stdout + proc.stderr
    # never the global provider: other libraries' spans are not ours to export
    assert lines["GLOBAL"] == "ProxyTracerProvider"
    if enabled:  # the check would see them
        assert "opentelemetry.sdk.trace" in lines["SDK"] and "opentelemetry.exporter.otlp.proto.http" in lines["SDK"]
        assert receiver.wait(lambda: receiver.spans())
    else:
        assert lines["SDK"] == ""
        assert not receiver.wait(lambda: receiver.bodies, timeout=1.0)


WITHOUT_THE_EXTRA = """
import importlib.abc, sys
class NoOtel(importlib.abc.MetaPathFinder):  # what a machine without the `otel` extra sees
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, NoOtel())
from agent_lsp.cli import main
print("EXIT=%d" % main({argv!r}))
"""


def test_without_the_extra_doctor_says_so_and_a_run_still_works(model, workspace, receiver):
    script_run_with_tools_and_a_delegate(model, workspace)
    env = otel_env(receiver)

    def cli(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", WITHOUT_THE_EXTRA.format(argv=argv)], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=60, env=env)

    doctor = cli(["doctor", "--workspace", str(workspace), "--base-url", model.base_url, "--model", "m", "--json"])
    checks = {c["name"]: c for c in json.loads(doctor.stdout.rsplit("EXIT=", 1)[0])["checks"]}
    assert checks["telemetry"]["ok"] is False, doctor.stdout + doctor.stderr
    assert "pip install 'agent-lsp-server[otel]'" in checks["telemetry"]["detail"]

    run = cli(agent_run(model, workspace, "MAIN: look around")[3:])
    assert "EXIT=0" in run.stdout, run.stdout + run.stderr
    assert "telemetry.enabled is on but OpenTelemetry is missing" in run.stderr
    assert receiver.bodies == []


def test_doctor_names_where_telemetry_goes_when_it_is_on(model, workspace, receiver):
    argv = ["doctor", "--workspace", str(workspace), "--base-url", model.base_url, "--model", "m", "--json"]
    on = subprocess.run([sys.executable, "-m", "agent_lsp", *argv], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=60, env=otel_env(receiver))
    checks = {c["name"]: c for c in json.loads(on.stdout)["checks"]}
    assert checks["telemetry"] == {"name": "telemetry", "ok": True, "detail": f"on: OTLP http/protobuf to {receiver.endpoint}"}
    off = subprocess.run([sys.executable, "-m", "agent_lsp", *argv], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=60, env=otel_env(receiver, enabled=False))
    assert "telemetry" not in {c["name"] for c in json.loads(off.stdout)["checks"]}
