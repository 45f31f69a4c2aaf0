"""Which signals are exported, by the standard OpenTelemetry variables: light (no SDK), read by
the exporter set-up and by `doctor`."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def exporting(signal: str) -> bool:
    """Whether a signal (TRACES, METRICS, LOGS) has an exporter, by the standard variables:
    `OTEL_<signal>_EXPORTER` (`otlp`, the default, or `none`; a comma list; others are not
    supported here and are ignored with a warning) and `OTEL_SDK_DISABLED=true` (none at all).
    A traces-only backend with `OTEL_METRICS_EXPORTER=none` never gets a metrics request."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    raw = os.environ.get(f"OTEL_{signal}_EXPORTER", "")
    names = {n.strip().lower() for n in raw.split(",") if n.strip()}
    if not names:
        return True
    unknown = sorted(names - {"otlp", "none"})
    if unknown:
        log.warning(
            "OTEL_%s_EXPORTER=%s: agent-lsp exports over OTLP only; %s ignored",
            signal,
            raw,
            ", ".join(unknown),
        )
    return "otlp" in names
