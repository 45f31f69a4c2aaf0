"""A real OTLP/HTTP receiver for tests and benchmarks: POST /v1/traces and /v1/metrics on
127.0.0.1, the protobuf bodies decoded with `opentelemetry-proto` (the `test` extra). Point a
process at it with `OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint`."""

from __future__ import annotations

import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    scope: str
    resource: dict[str, Any] = field(default_factory=dict)


@dataclass
class Point:
    """One histogram data point."""

    metric: str
    unit: str
    attributes: dict[str, Any]
    count: int
    sum: float


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def _attrs(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in items}


class OtlpReceiver:
    """Collects every export; `bodies` keeps the raw (decompressed) bytes, `headers` each
    request's. `refuse`: paths answered 405 (a traces-only backend refuses /v1/metrics), their
    requests counted in `refused`."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        self.refused: list[str] = []
        self.headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path in refuse:
                    with receiver._lock:
                        receiver.refused.append(self.path)
                    self.send_response(405)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with receiver._lock:
                    receiver.bodies.append((self.path, body))
                    receiver.headers.append({k.lower(): v for k, v in self.headers.items()})
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="otlp-receiver"
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def raw(self) -> bytes:
        with self._lock:
            return b"".join(body for _, body in self.bodies)

    def spans(self) -> list[Span]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        out = []
        with self._lock:
            bodies = [b for path, b in self.bodies if path == "/v1/traces"]
        for body in bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for rs in request.resource_spans:
                resource = _attrs(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        out.append(
                            Span(
                                s.name,
                                s.trace_id.hex(),
                                s.span_id.hex(),
                                s.parent_span_id.hex(),
                                s.kind,
                                _attrs(s.attributes),
                                [(e.name, _attrs(e.attributes)) for e in s.events],
                                s.status.code,
                                s.status.message,
                                ss.scope.name,
                                resource,
                            )
                        )
        return out

    def points(self, name: str | None = None) -> list[Point]:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )

        out = []
        with self._lock:
            bodies = [b for path, b in self.bodies if path == "/v1/metrics"]
        for body in bodies:
            request = ExportMetricsServiceRequest.FromString(body)
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        if (
                            name is not None
                            and m.name != name
                            or m.WhichOneof("data") != "histogram"
                        ):
                            continue
                        for p in m.histogram.data_points:
                            out.append(Point(m.name, m.unit, _attrs(p.attributes), p.count, p.sum))
        return out

    def wait(self, predicate: Any, timeout: float = 10.0) -> bool:
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            if predicate():
                return True
            time.sleep(0.05)
        return bool(predicate())


def serve() -> None:
    """`python -m agent_lsp.testing.otlp`: a receiver in a process of its own (a benchmark's
    collector must not compete for the measured process's GIL); prints its endpoint, then
    serves until stdin closes."""
    import sys

    with OtlpReceiver() as receiver:
        print(receiver.endpoint, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    serve()
