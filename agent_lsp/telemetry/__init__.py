"""OpenTelemetry for agent-lsp, an integration outside the core: hub.py is what front ends plug
into the host (light); otel.py holds the SDK and is imported only when telemetry is on."""
