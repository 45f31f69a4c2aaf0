"""The OpenTelemetry SDK behind the telemetry port: a private tracer provider and meter provider
(never the global ones: other libraries' spans are not exported), the OTLP exporter configured
by the standard `OTEL_EXPORTER_OTLP_*` variables only (HTTP/protobuf unless they say `grpc`),
and the GenAI semantic conventions: `invoke_agent agent-lsp` per agent, `chat <model>` per
model call, `execute_tool <tool>` per tool call, the metrics `gen_ai.client.token.usage` and
`gen_ai.client.operation.duration`. Every string recorded is redacted of the key first.
Imported only when a run has telemetry on."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from agent_lsp import __version__
from agent_lsp.agent.exec import keyguard
from agent_lsp.agent.messages import Reply, ToolCall
from agent_lsp.agent.ports import TraceSpan
from agent_lsp.agent.state.transcript import Redactor
from agent_lsp.telemetry.content import input_messages, output_messages
from agent_lsp.telemetry.signals import exporting

log = logging.getLogger(__name__)

AGENT_NAME = "agent-lsp"
SCOPE = "agent_lsp"
# The conventions' advisory bucket boundaries for the two GenAI client metrics.
TOKEN_BUCKETS = [
    1,
    4,
    16,
    64,
    256,
    1024,
    4096,
    16384,
    65536,
    262144,
    1048576,
    4194304,
    16777216,
    67108864,
]
DURATION_BUCKETS = [
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
]
Attributes = Mapping[str, str | bool | int | float | list[str]]
# Event attributes that carry what the user or the model wrote (an approval rule's command or
# path): exported only with `telemetry.logContent`, as the tool's arguments are.
CONTENT_EVENT_ATTRIBUTES = frozenset({"agent_lsp.approval.rule"})


def _protocol(signal: str) -> str:
    return (
        (
            os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
            or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        .strip()
        .lower()
    )


def _exporters() -> tuple[Any, Any]:
    """(span exporter, metric exporter), None for a signal turned off (`exporting`); each reads
    its endpoint, headers, timeout and compression from the environment itself."""
    traces, metrics = exporting("TRACES"), exporting("METRICS")
    wanted = [s for s, on in (("TRACES", traces), ("METRICS", metrics)) if on]
    if any(_protocol(s) == "grpc" for s in wanted):
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter as GrpcMetrics,
            )
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GrpcSpans,
            )

            return (GrpcSpans() if traces else None), (GrpcMetrics() if metrics else None)
        except ImportError:
            log.warning(
                "OTEL_EXPORTER_OTLP_PROTOCOL is grpc "
                "but opentelemetry-exporter-otlp-proto-grpc is not installed: "
                "exporting over HTTP/protobuf instead"
            )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return (OTLPSpanExporter() if traces else None), (OTLPMetricExporter() if metrics else None)


class Backend:
    """The process's providers, made on the first run with telemetry on."""

    def __init__(self) -> None:
        attributes: dict[str, str] = {"service.version": __version__}
        if not os.environ.get("OTEL_SERVICE_NAME"):
            attributes["service.name"] = AGENT_NAME
        resource = Resource.create(attributes)
        spans, metrics = _exporters()
        # Private providers, not the global ones; no atexit hook (the exit flush is ours, bounded).
        self.tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        if spans is not None:
            self.tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        self.meter_provider = MeterProvider(
            resource=resource,
            metric_readers=[PeriodicExportingMetricReader(metrics)] if metrics is not None else [],
            shutdown_on_exit=False,
        )
        self.tracer = self.tracer_provider.get_tracer(SCOPE, __version__)
        meter = self.meter_provider.get_meter(SCOPE, __version__)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.dirty = False  # recorded something since the last flush

    def run(
        self, settings: Any, *, run_id: str, session_id: str, model: str, provider: str
    ) -> RunOtel:
        redact = Redactor(keyguard.secrets(keyguard.environment(), [settings.api_key_env]))
        return RunOtel(
            self,
            redact,
            run_id=run_id,
            session_id=session_id,
            model=model,
            provider=provider,
            content=bool(settings.telemetry.log_content),
        )

    def flush(self, timeout: float) -> None:
        """Export what is pending, waiting at most `timeout` seconds in all (an unreachable
        collector must not hold the process)."""
        if not self.dirty:
            return
        self.dirty = False
        millis = int(timeout * 1000)
        threads = [
            threading.Thread(
                target=flush, args=(millis,), daemon=True, name="agent-lsp-telemetry-flush"
            )
            for flush in (self.tracer_provider.force_flush, self.meter_provider.force_flush)
        ]
        ends = time.monotonic() + timeout
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, ends - time.monotonic()))


_backend: Backend | None = None
_lock = threading.Lock()


def backend() -> Backend:
    global _backend
    with _lock:
        if _backend is None:
            _backend = Backend()
        return _backend


def flush_all(timeout: float) -> None:
    if _backend is not None:
        _backend.flush(timeout)


class Span:
    """One recorded span, as the loop holds it."""

    def __init__(
        self,
        span: Any,
        started: float,
        model: str = "",
        *,
        redact: Redactor | None = None,
        content: bool = False,
    ):
        self.span = span
        self.started = started
        self.model = model  # a chat span's request model; "main" on the run's own agent span
        self.ended = False
        self.redact = redact
        self.content = content

    def event(self, name: str, attributes: Mapping[str, str | bool | int]) -> None:
        if self.ended:
            return
        kept = {
            k: self.redact(v) if isinstance(v, str) and self.redact is not None else v
            for k, v in attributes.items()
            if self.content or k not in CONTENT_EVENT_ATTRIBUTES
        }
        self.span.add_event(name, kept)

    def traceparent(self) -> str | None:
        context = self.span.get_span_context()
        if not context.is_valid:
            return None
        return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


class RunOtel:
    """One run's spans and metrics (the port RunTelemetry)."""

    def __init__(
        self,
        backend: Backend,
        redact: Redactor,
        *,
        run_id: str,
        session_id: str,
        model: str,
        provider: str,
        content: bool,
    ):
        self.backend = backend
        self.redact = redact
        self.run_id = run_id
        self.session_id = session_id
        self.model = model
        self.provider = provider
        self.content = content
        self._open: dict[
            int, Span
        ] = {}  # spans not yet ended, by id: all end with the main agent's

    # -- spans ------------------------------------------------------------------------------
    def _start(
        self,
        name: str,
        parent: TraceSpan | None,
        kind: SpanKind,
        attributes: Attributes,
        model: str = "",
    ) -> Span:
        context = trace.set_span_in_context(parent.span) if isinstance(parent, Span) else None
        span = self.backend.tracer.start_span(
            self.redact(name), context=context, kind=kind, attributes=self._clean(attributes)
        )
        held = Span(span, time.monotonic(), model, redact=self.redact, content=self.content)
        self._open[id(held)] = held
        self.backend.dirty = True
        return held

    def _end(
        self,
        span: TraceSpan,
        attributes: Attributes,
        error: str | None = None,
        error_type: str | None = None,
    ) -> Span | None:
        if not isinstance(span, Span) or span.ended:
            return None
        span.ended = True
        self._open.pop(id(span), None)
        span.span.set_attributes(self._clean(attributes))
        if error is not None or error_type is not None:
            span.span.set_attribute("error.type", error_type or "_OTHER")
            span.span.set_status(Status(StatusCode.ERROR, self.redact(error or error_type or "")))
        span.span.end()
        return span

    def _clean(self, attributes: Attributes) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in attributes.items():
            if isinstance(value, str):
                out[key] = self.redact(value)
            elif isinstance(value, list):
                out[key] = [self.redact(v) for v in value]
            else:
                out[key] = value
        return out

    def _common(self, operation: str) -> dict[str, str]:
        return {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": self.provider,
            "gen_ai.conversation.id": self.session_id,
        }

    # -- the loop's nodes -------------------------------------------------------------------
    def agent_started(self, agent_id: str, parent: TraceSpan | None) -> TraceSpan:
        return self._start(
            f"invoke_agent {AGENT_NAME}",
            parent,
            SpanKind.INTERNAL,
            {
                **self._common("invoke_agent"),
                "gen_ai.agent.name": AGENT_NAME,
                "gen_ai.agent.id": agent_id,
                "gen_ai.request.model": self.model,
                "agent_lsp.run.id": self.run_id,
            },
            model="main" if parent is None else "",
        )

    def agent_ended(self, span: TraceSpan, stop: str, cause: str, error: str | None = None) -> None:
        attributes = {"agent_lsp.stop.reason": stop, "agent_lsp.stop.cause": cause}
        if isinstance(span, Span) and span.model == "main":
            # A cancel can leave calls (and a sub-agent's) without their end: they end with the
            # run's span.
            for other in reversed([s for s in self._open.values() if s is not span]):
                self._end(other, {}, "cancelled", "cancelled")
        failed = stop == "fatal"
        self._end(span, attributes, error if failed else None, cause if failed else None)

    def chat_started(
        self, parent: TraceSpan, model: str, messages: list[dict[str, Any]]
    ) -> TraceSpan:
        attributes: dict[str, Any] = {**self._common("chat"), "gen_ai.request.model": model}
        if self.content:
            system, rest = input_messages(messages)
            attributes["gen_ai.input.messages"] = rest
            if system is not None:
                attributes["gen_ai.system_instructions"] = system
        return self._start(f"chat {model}", parent, SpanKind.CLIENT, attributes, model=model)

    def chat_ended(self, span: TraceSpan, reply: Reply | None, error: str | None = None) -> None:
        if not isinstance(span, Span):
            return
        request_model = span.model
        attributes: dict[str, Any] = {}
        metric: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.redact(request_model),
        }
        error_type = None
        if reply is not None:
            response_model = reply.model or request_model
            attributes["gen_ai.response.model"] = response_model
            metric["gen_ai.response.model"] = self.redact(response_model)
            attributes["gen_ai.response.finish_reasons"] = [
                reply.finish_reason or ("length" if reply.cut else "stop")
            ]
            if reply.usage is not None:
                attributes["gen_ai.usage.input_tokens"] = reply.usage.prompt_tokens
                attributes["gen_ai.usage.output_tokens"] = reply.usage.completion_tokens
                if reply.usage.cached_tokens:
                    attributes["gen_ai.usage.cache_read.input_tokens"] = reply.usage.cached_tokens
            if self.content:
                attributes["gen_ai.output.messages"] = output_messages(reply)
        else:
            # The exception's type (the loop's form).
            error_type = (error or "_OTHER").partition(":")[0]
            metric["error.type"] = error_type
        self._end(span, attributes, error if reply is None else None, error_type)
        self.backend.duration.record(time.monotonic() - span.started, metric)
        if reply is not None and reply.usage is not None:
            self.backend.tokens.record(
                reply.usage.prompt_tokens, {**metric, "gen_ai.token.type": "input"}
            )
            self.backend.tokens.record(
                reply.usage.completion_tokens, {**metric, "gen_ai.token.type": "output"}
            )

    def tool_started(self, parent: TraceSpan, call: ToolCall) -> TraceSpan:
        attributes: dict[str, Any] = {
            **self._common("execute_tool"),
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        if self.content:
            attributes["gen_ai.tool.call.arguments"] = call.arguments
        return self._start(f"execute_tool {call.name}", parent, SpanKind.INTERNAL, attributes)

    def tool_ended(self, span: TraceSpan, outcome: str, decision: str | None) -> None:
        attributes = {
            "agent_lsp.tool.outcome": outcome,
            **({"agent_lsp.approval.decision": decision} if decision else {}),
        }
        self._end(span, attributes, None, "tool_error" if outcome == "error" else None)
