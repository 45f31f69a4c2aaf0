"""The GitHub Action's logic (`action.yml` at the repository root), kept out of its bash steps so
that it can be tested: `python -m agent_lsp.action write-settings | mask | outputs`.

The inputs arrive as environment variables (`INPUT_PROMPT`, `INPUT_MODEL`, ...) that the
action's steps set from `${{ inputs.* }}`: no input is ever spliced into a script. The API key
reaches only the run step, in `OPENAI_API_KEY`; nothing here writes it anywhere (the `mask`
command hands it to the runner's log masking, the one line the runner consumes and never shows).
Stdlib only: it runs before anything else of agent-lsp is needed."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

SANDBOX_MODES = ("off", "read-only", "workspace-write")
# The tools that change files: allowed without asking (the diff is the run's product and is
# reviewed as a pull request). Every other side effect is denied, except a command that runs
# inside the sandbox (`approval.sandboxed: allow` turns run_command's `ask` into `allow` only
# there; outside it, `ask` has no one to ask and is denied); with the sandbox off, run_command is
# denied outright.
EDIT_TOOLS = ("edit_file", "write_file", "rename_symbol")


class ActionError(Exception):
    """An input the action cannot use: reported as a workflow error, exit 2."""


def _input(name: str) -> str:
    return os.environ.get(f"INPUT_{name.upper().replace('-', '_')}", "").strip()


def _positive_int(name: str) -> int | None:
    text = _input(name)
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ActionError(f"{name} must be a whole number, not {text!r}") from None
    if value < 1:
        raise ActionError(f"{name} must be at least 1, not {value}")
    return value


def _positive_float(name: str) -> float | None:
    text = _input(name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ActionError(f"{name} must be a number of US dollars, not {text!r}") from None
    if not value > 0:
        raise ActionError(f"{name} must be more than 0, not {text}")
    return value


def settings_from_inputs() -> dict[str, Any]:
    """The run's settings file (the CONTRACT's camelCase shape) from the inputs."""
    sandbox = _input("sandbox") or "workspace-write"
    if sandbox not in SANDBOX_MODES:
        raise ActionError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}, not {sandbox!r}")
    settings: dict[str, Any] = {
        "approval": {
            "default": "deny",
            "tools": {
                **dict.fromkeys(EDIT_TOOLS, "allow"),
                "run_command": "deny" if sandbox == "off" else "ask",
            },
            "sandboxed": "allow",
        },
        "sandbox": {"mode": sandbox},
        # The checked-out repository's own MCP servers never start in CI.
        "mcp": {"workspaceServers": "deny"},
    }
    if model := _input("model"):
        settings["model"] = model
    if base_url := _input("base-url"):
        settings["baseUrl"] = base_url
    if (turns := _positive_int("max-turns")) is not None:
        settings["maxTurns"] = turns
    if (budget := _positive_float("max-budget-usd")) is not None:
        settings["budget"] = {"maxCostUsd": budget}
    if pricing := workflow_pricing():
        settings["pricing"] = pricing
    return settings


def workflow_pricing() -> dict[str, Any]:
    """`pricing` of the workflow's own settings file (`AGENT_LSP_SETTINGS` in the job's env), the
    one key taken from it: the run gets the action's file instead, and a budget needs a price for
    the model (Decision 36); a price cannot widen what the run may do."""
    named = os.environ.get("AGENT_LSP_SETTINGS", "").strip()
    if not named:
        return {}
    try:
        data = json.loads(Path(named).expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ActionError(
            f"the settings file AGENT_LSP_SETTINGS names cannot be read: {exc}"
        ) from None
    pricing = data.get("pricing") if isinstance(data, dict) else None
    return pricing if isinstance(pricing, dict) else {}


def output_schema(workspace: Path, folder: Path) -> Path | None:
    """The `output-schema` input: inline JSON (written to a file) or a workspace-relative path."""
    text = _input("output-schema")
    if not text:
        return None
    if text.startswith(("{", "[")):
        path = folder / "output-schema.json"
        path.write_text(text + "\n", encoding="utf-8")
        return path
    path = Path(text)
    return path if path.is_absolute() else workspace / path


def write_settings(folder: Path, workspace: Path) -> str:
    """Writes `settings.json` (and an inline schema) into `folder`; returns the step's
    `$GITHUB_OUTPUT` text: the settings file's path and the schema's (empty: none)."""
    folder.mkdir(parents=True, exist_ok=True)
    settings_file = folder / "settings.json"
    settings_file.write_text(json.dumps(settings_from_inputs(), indent=2) + "\n", encoding="utf-8")
    schema = output_schema(workspace, folder)
    return output_lines("settings", str(settings_file)) + output_lines(
        "output-schema", "" if schema is None else str(schema)
    )


def mask_lines(secret: str) -> list[str]:
    """The runner's masking commands for a secret (one per line of it)."""
    return [f"::add-mask::{line}" for line in secret.splitlines() if line.strip()]


def relative_paths(uris: list[str], workspace: Path) -> list[str]:
    """The report's editedFiles (file URIs) as workspace-relative paths."""
    root = workspace.resolve()
    paths = []
    for uri in uris:
        parsed = urlparse(uri)
        path = Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(uri)
        try:
            paths.append(path.resolve().relative_to(root).as_posix())
        except ValueError:
            paths.append(str(path))
    return paths


def output_lines(name: str, value: str) -> str:
    """One `$GITHUB_OUTPUT` entry: `name=value`, or the delimiter form for a value with a line
    break, with a random delimiter that the value does not contain."""
    if "\n" not in value and "\r" not in value:
        return f"{name}={value}\n"
    while (delimiter := f"ghadelimiter_{uuid.uuid4()}") in value:
        pass  # pragma: no cover - a collision with a random UUID
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def outputs(report_path: Path, workspace: Path) -> tuple[str, bool]:
    """The `$GITHUB_OUTPUT` text for a run's report, and whether the report could be read."""
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
        ok = isinstance(report, dict)
    except (OSError, ValueError):
        report, ok = {}, False
    if not ok:
        report = {}
    final_text = report.get("finalText") or ""
    edited = relative_paths(list(report.get("editedFiles") or []), workspace)
    return (
        output_lines("report", str(report_path))
        + output_lines("final-text", str(final_text))
        + output_lines("edited-files", "\n".join(edited)),
        ok,
    )


def _folder() -> Path:
    return Path(os.environ["RUNNER_TEMP"]) / "agent-lsp"


def _workspace() -> Path:
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())


def _append_output(text: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as out:
        out.write(text)


def main(argv: list[str] | None = None) -> int:
    command = (sys.argv[1:] if argv is None else argv)[:1]
    try:
        if command == ["write-settings"]:
            _append_output(write_settings(_folder(), _workspace()))
            return 0
        if command == ["mask"]:
            for line in mask_lines(os.environ.get("OPENAI_API_KEY", "")):
                print(line, flush=True)
            return 0
        if command == ["outputs"]:
            text, ok = outputs(_folder() / "report.json", _workspace())
            _append_output(text)
            if not ok:
                print("::warning::agent-lsp wrote no report (see the step's log)", file=sys.stderr)
            return 0
    except ActionError as exc:
        print(f"::error title=agent-lsp action::{exc}", file=sys.stderr)
        return 2
    print("usage: python -m agent_lsp.action write-settings|mask|outputs", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
