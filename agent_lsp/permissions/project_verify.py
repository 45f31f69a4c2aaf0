"""A project's own `verify` (CONTRACT Decision 83): `.agent-lsp/settings.json` in a workspace
folder is read for `verify` only (its other keys are named and ignored); its commands run only
with the user's consent, asked per hash of the `verify` object as written, like a project's
hooks. The user's own `verify` wins: then the project's is not even asked about."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_lsp.agent.display import escape_invisible
from agent_lsp.settings import MAX_SETTINGS_FILE
from agent_lsp.settings_schema import VerifySettings

log = logging.getLogger(__name__)

PROJECT_SETTINGS = Path(".agent-lsp") / "settings.json"
VERIFY_KIND = "verify"


def own_verify(settings: Any) -> bool:
    """Whether the user's own settings say what to verify (then they win)."""
    verify = getattr(settings, "verify", None)
    return isinstance(verify, VerifySettings) and bool(verify.commands or verify.diagnostics)


def read_project_verify(roots: list[Path]) -> tuple[Path, dict[str, Any]] | None:
    """The first folder's `.agent-lsp/settings.json` that declares `verify`: its path and the
    object as written; None when none does (a bad file is logged, never fatal)."""
    for root in roots:
        path = Path(root) / PROJECT_SETTINGS
        try:
            if not path.is_file():
                continue
            if path.stat().st_size > MAX_SETTINGS_FILE:
                log.warning("%s is larger than %d bytes: ignored", path, MAX_SETTINGS_FILE)
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("%s cannot be read: %s", path, exc)
            continue
        if not isinstance(data, dict):
            log.warning("%s is not a JSON object: ignored", path)
            continue
        if ignored := sorted(k for k in data if k != "verify"):
            log.info("%s: only `verify` is read; ignored: %s", path, ", ".join(ignored))
        verify = data.get("verify")
        if isinstance(verify, dict):
            return path, verify
    return None


def project_keys_ignored(roots: list[Path]) -> list[str]:
    """`path: key` for each key of a project settings file that is not read (for setup)."""
    out: list[str] = []
    for root in roots:
        path = Path(root) / PROJECT_SETTINGS
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out += [f"{path}: {key}" for key in sorted(data) if key != "verify"]
    return out


def parse_verify(path: Path, verify: dict[str, Any]) -> VerifySettings | None:
    try:
        return VerifySettings.model_validate(verify)
    except ValidationError as exc:
        log.warning("%s: verify is not valid, ignored: %s", path, exc)
        return None


def verify_entry(verify: dict[str, Any]) -> str:
    """The object as the user is asked about it (and its consent is keyed by): canonical JSON,
    so a change of any command asks again."""
    return json.dumps(verify, sort_keys=True, ensure_ascii=False)


def verify_prompt(entries: list[str]) -> str:
    lines = ["The workspace's .agent-lsp/settings.json asks to verify each run with (commands "
             "run on your machine):"]
    lines += [f"  {escape_invisible(text, keep_newlines=False)}" for text in entries]
    lines.append("Run these checks at the end of the agent's runs?")
    return "\n".join(lines)
