"""agent-lsp's command line: its commands, their flags and help (cli.py parses and dispatches)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agent_lsp import __version__

START_HERE = """\
start here:
  agent-lsp demo                 a two-minute tour, offline: no API key, nothing to set up
  agent-lsp demo --serve-model   then try `run` and your editor offline, on the demo's recording
  agent-lsp run "TASK"           the agent in this terminal; needs OPENAI_API_KEY set, or
                                 --base-url to a local OpenAI-compatible server (Ollama, llama.cpp,
                                 LM Studio, vLLM): e.g. --base-url http://localhost:11434/v1
  agent-lsp doctor               checks the key, the endpoint, the model, ripgrep and the sandbox,
                                 and lists your hooks, rules, skills, commands and agents

Editors start `agent-lsp` (the language server) or `agent-lsp acp` themselves: see README.md."""

ACP_DESCRIPTION = """\
Serve the agent over the Agent Client Protocol (ACP) on stdin/stdout.

ACP (https://agentclientprotocol.com) is how editors host a coding agent in a chat panel:
Zed, JetBrains IDEs (AI Assistant), Emacs (agent-shell), Neovim (codecompanion.nvim, avante.nvim).
The editor starts this command itself; typed into a terminal it only prints a hint.
Settings come from your settings file ($AGENT_LSP_SETTINGS, else the user config dir's
agent-lsp/settings.json: `agent-lsp doctor` names it) and the environment (OPENAI_API_KEY,
OPENAI_BASE_URL, AGENT_LSP_MODEL)."""

ACP_EPILOG = """\
Zed: add to settings.json, then open the agent panel, + -> agent-lsp:
  {
    "agent_servers": {
      "agent-lsp": {
        "type": "custom",
        "command": "agent-lsp",
        "args": ["acp"],
        "env": { "OPENAI_API_KEY": "sk-..." }
      }
    }
  }
Offline, with no key: run `agent-lsp demo --serve-model` and put its URL in the env as
"OPENAI_BASE_URL" (and "AGENT_LSP_MODEL": "agent-lsp-demo") instead of the key."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-lsp",
        description="An LLM coding agent served over the Language Server Protocol.",
        epilog=START_HERE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agent-lsp {__version__}")
    sub = parser.add_subparsers(dest="command")
    _serve(sub)
    _run(sub)
    _chat(sub)
    _sessions(sub)
    _worktrees(sub)
    _rewind(sub)
    _doctor(sub)
    _acp(sub)
    _demo(sub)
    return parser


def _serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the language server (default: on stdio)")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="talk LSP on stdin/stdout (default)")
    mode.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP address, for debugging")
    serve.add_argument("--log-level", default="INFO", help="stderr log level (default INFO)")


def _run(sub: Any) -> None:
    run = sub.add_parser("run", help="run the agent headless in this terminal")
    run.add_argument("task", help="what the agent should do; - reads it from stdin")
    _workspace(run)
    run.add_argument("--yes", action="store_true", help="approve every side effect without asking")
    run.add_argument("--model", help="model name, or replay:PATH")
    run.add_argument(
        "--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1"
    )
    run.add_argument("--max-turns", type=int, help="LLM calls before the max_turns stop")
    run.add_argument(
        "--max-budget-usd",
        type=_dollars,
        metavar="N",
        help="the run's cost limit in US dollars, sub-agents included (budget.maxCostUsd); "
        "needs a price for the model (setting pricing) or an endpoint that reports cost",
    )
    run.add_argument(
        "--session",
        metavar="ID",
        help="continue this session: its id or a unique prefix (see `agent-lsp sessions`)",
    )
    run.add_argument("--mode", choices=["plan"], help="plan: read-only tools, the answer is a plan")
    run.add_argument(
        "--settings",
        type=Path,
        metavar="FILE",
        help="your settings file for this run (instead of the default one)",
    )
    run.add_argument(
        "--json", action="store_true", help="print only the run report, as JSON, on stdout"
    )
    run.add_argument(
        "--worktree",
        nargs="?",
        const="",
        metavar="NAME",
        help="work in a git worktree of its own, on a new branch agent/NAME "
        "(default NAME: the run id), with your uncommitted changes; an idle NAME is reused",
    )
    run.add_argument(
        "--output-format",
        choices=["text", "json", "stream-json"],
        help="text (default); json: the report as JSON (= --json); stream-json: one JSON line per "
        "stream event, the last one the result with the report",
    )
    run.add_argument(
        "--output-schema",
        type=Path,
        metavar="FILE",
        help="a JSON Schema the answer must fit: the report's structuredOutput is that JSON",
    )


def _chat(sub: Any) -> None:
    chat = sub.add_parser(
        "chat", help="talk with the agent in this terminal: each line a run of one session"
    )
    _workspace(chat)
    chat.add_argument(
        "--session",
        metavar="ID",
        help="continue this session: its id or a unique prefix (see `agent-lsp sessions`)",
    )
    chat.add_argument("--model", help="model name")
    chat.add_argument(
        "--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1"
    )
    chat.add_argument("--mode", choices=["plan"], help="plan: read-only tools, answers are plans")
    chat.add_argument(
        "--settings",
        type=Path,
        metavar="FILE",
        help="your settings file for this chat (instead of the default one)",
    )


def _sessions(sub: Any) -> None:
    sessions = sub.add_parser(
        "sessions", help="list this workspace's sessions and their runs, newest first"
    )
    _workspace(sessions)
    sessions.add_argument("--json", action="store_true", help="print them as JSON")
    sessions_sub = sessions.add_subparsers(dest="action")
    delete = sessions_sub.add_parser(
        "delete", help="delete sessions (their index and transcripts): by id, or by age"
    )
    delete.add_argument(
        "ids",
        nargs="*",
        metavar="ID",
        help="session ids, or unique prefixes of them (see `agent-lsp sessions`)",
    )
    delete.add_argument(
        "--older-than",
        metavar="AGE",
        help="every session last updated longer ago than AGE, e.g. 30d or 12h",
    )
    # SUPPRESS: the subcommand's own default must not overwrite a --workspace given before `delete`
    delete.add_argument("--workspace", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _rewind(sub: Any) -> None:
    rewind = sub.add_parser(
        "rewind", help="put back the files a run changed, as they were before it"
    )
    rewind.add_argument("run_id", metavar="RUN_ID")
    _workspace(rewind)
    rewind.add_argument(
        "--force", action="store_true", help="also overwrite files changed since the run"
    )
    rewind.add_argument(
        "--include-later",
        action="store_true",
        help="first rewind the later runs of the session that touched the same files",
    )
    rewind.add_argument("--json", action="store_true", help="print the result as JSON")


def _doctor(sub: Any) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="check the key, the endpoint, the model, rg, bwrap and the MCP servers, and list "
        "your setup (hooks, rules, skills, commands, agents)",
    )
    _workspace(doctor)
    doctor.add_argument(
        "--settings",
        type=Path,
        metavar="FILE",
        help="your settings file (instead of the default one)",
    )
    doctor.add_argument("--model", help="model name to check, as for `run`")
    doctor.add_argument("--base-url", help="OpenAI-compatible endpoint to check, as for `run`")
    doctor.add_argument(
        "--json", action="store_true", help="print the checks (and the setup) as JSON"
    )


def _acp(sub: Any) -> None:
    sub.add_parser(
        "acp",
        help="serve the agent over the Agent Client Protocol on stdio "
        "(Zed, JetBrains, agent-shell)",
        description=ACP_DESCRIPTION,
        epilog=ACP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _demo(sub: Any) -> None:
    demo = sub.add_parser(
        "demo", help="a two-minute offline tour: the real server, a recorded session, no API key"
    )
    demo.add_argument("--yes", action="store_true", help="approve every step without asking")
    demo.add_argument(
        "--serve-model",
        action="store_true",
        help="instead of the tour, serve the demo's recorded model "
        "as an OpenAI-compatible endpoint on 127.0.0.1 "
        "and print its base URL, to try `agent-lsp run` and the editors offline (until Ctrl-C)",
    )
    demo.add_argument(
        "--port",
        type=int,
        default=0,
        metavar="N",
        help="with --serve-model: the port (default: any free one)",
    )


def _worktrees(sub: Any) -> None:
    worktrees = sub.add_parser(
        "worktrees", help="list this workspace's worktrees of `run --worktree`"
    )
    _workspace(worktrees)
    worktrees.add_argument("--json", action="store_true", help="print them as JSON")
    remove = worktrees.add_subparsers(dest="action").add_parser(
        "remove", help="remove a worktree (its branch is kept)"
    )
    remove.add_argument("name", metavar="NAME")
    remove.add_argument(
        "--force", action="store_true", help="even when it has uncommitted changes (they are lost)"
    )
    remove.add_argument("--workspace", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _dollars(text: str) -> float:
    """--max-budget-usd: a finite amount above zero (else argparse's usage error, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of US dollars: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def _workspace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        type=Path,
        default=None,
        help="workspace folder "
        "(default: the nearest folder from here up that agent-lsp has state for, "
        "else the nearest with .agent-lsp/, else the git root, else the current directory)",
    )
