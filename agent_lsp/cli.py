"""`agent-lsp`: serve (the language server) | run (headless) | sessions | worktrees | rewind |
doctor | acp | demo | --version. Thin: each command hands over to its module."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_lsp import __version__

if TYPE_CHECKING:
    from agent_lsp.settings import Settings

EXIT_USAGE = 2
TTY_HINT = (
    "agent-lsp speaks the Language Server Protocol on stdin/stdout "
    "and is meant to be started by an editor "
    '(see README.md). In a terminal, try `agent-lsp run "TASK"` or `agent-lsp demo`. Ctrl-C exits.'
)


START_HERE = """\
start here:
  agent-lsp demo                 a two-minute tour, offline: no API key, nothing to set up
  agent-lsp demo --serve-model   then try `run` and your editor offline, on the demo's recording
  agent-lsp run "TASK"           the agent in this terminal; needs OPENAI_API_KEY set, or
                                 --base-url to a local OpenAI-compatible server (Ollama, llama.cpp,
                                 LM Studio, vLLM): e.g. --base-url http://localhost:11434/v1
  agent-lsp doctor               checks the key, the endpoint, the model, ripgrep and the sandbox

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-lsp",
        description="An LLM coding agent served over the Language Server Protocol.",
        epilog=START_HERE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agent-lsp {__version__}")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the language server (default: on stdio)")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="talk LSP on stdin/stdout (default)")
    mode.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP address, for debugging")
    serve.add_argument("--log-level", default="INFO", help="stderr log level (default INFO)")
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
        "--session", metavar="ID", help="continue this session (see `agent-lsp sessions`)"
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
        "ids", nargs="*", metavar="ID", help="session ids (see `agent-lsp sessions`)"
    )
    delete.add_argument(
        "--older-than",
        metavar="AGE",
        help="every session last updated longer ago than AGE, e.g. 30d or 12h",
    )
    # SUPPRESS: the subcommand's own default must not overwrite a --workspace given before `delete`
    delete.add_argument("--workspace", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    _worktrees(sub)
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
    doctor = sub.add_parser(
        "doctor", help="check the key, the endpoint, the model, rg, bwrap and the MCP servers"
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
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    sub.add_parser(
        "acp",
        help="serve the agent over the Agent Client Protocol on stdio "
        "(Zed, JetBrains, agent-shell)",
        description=ACP_DESCRIPTION,
        epilog=ACP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    return parser


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


def main(argv: list[str] | None = None) -> int:
    # Before anything else runs or starts a child: the key out of the environment block and of
    # every child's environment, the process non-dumpable (Decision 45). The settings' own
    # `apiKeyEnv` is taken out when a front end resolves its settings.
    from agent_lsp.agent.exec.keyguard import seal_process

    seal_process()
    given = sys.argv[1:] if argv is None else argv
    # How editors start it: skip argparse (start-up time).
    if given in ([], ["serve"], ["serve", "--stdio"]):
        return _serve(argparse.Namespace(tcp=None, log_level="INFO"))
    args = _parser().parse_args(argv)
    if args.command in (None, "serve"):
        return _serve(args)
    _log_to_terminal()
    if hasattr(args, "workspace") and args.workspace is None:
        from agent_lsp.settings import state_dir
        from agent_lsp.terminal.workspace import find_workspace

        args.workspace = find_workspace(Path.cwd(), state_dir())
    if getattr(args, "workspace", None) is not None and not args.workspace.is_dir():
        print(
            f"agent-lsp {args.command}: --workspace {args.workspace} is not a directory",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.command == "run":
        return _run(args)
    if args.command == "sessions":
        from agent_lsp.terminal.sessions import sessions_cli

        return sessions_cli(args)
    if args.command == "worktrees":
        from agent_lsp.terminal.worktrees import worktrees_cli

        return worktrees_cli(args)
    if args.command == "rewind":
        from agent_lsp.terminal.rewind import rewind_cli

        return _interruptible(rewind_cli(args))
    if args.command == "doctor":
        return _doctor(args)
    if args.command == "acp":
        from agent_lsp.acp.main import serve_acp

        return serve_acp()
    if args.command == "demo":
        return _demo(args)
    return EXIT_USAGE


def _doctor(args: argparse.Namespace) -> int:
    """Like `run`'s settings, but the file and every problem are checks of their own (listed
    first), not stderr lines."""
    from agent_lsp.settings import from_environment, from_user_file, resolve, user_settings_path
    from agent_lsp.terminal.doctor import SettingsSource, doctor_cli

    if args.settings is not None and not args.settings.is_file():
        print(f"agent-lsp doctor: --settings {args.settings} is not a file", file=sys.stderr)
        return EXIT_USAGE
    path = args.settings or user_settings_path()
    user, file_problems = from_user_file(path)
    flags = {
        k: v for k, v in {"model": args.model, "baseUrl": args.base_url}.items() if v is not None
    }
    settings, problems = resolve(user, from_environment(), flags)
    source = SettingsSource(path, path.is_file(), file_problems, problems)
    return _interruptible(doctor_cli(args, settings, source))


def _demo(args: argparse.Namespace) -> int:
    if args.serve_model:
        from agent_lsp.demo.serve_model import serve_model

        return serve_model(args.port)
    if args.port:
        print("agent-lsp demo: --port goes with --serve-model", file=sys.stderr)
        return EXIT_USAGE
    from agent_lsp.demo.driver import run_demo

    return run_demo(yes=args.yes)


def _serve(args: argparse.Namespace) -> int:
    if sys.stdin.isatty():
        # A person started it by hand: say what it is, and let one Ctrl-C end it cleanly.
        from agent_lsp.frontend import exit_on_ctrl_c

        exit_on_ctrl_c()
        print(TTY_HINT, file=sys.stderr, flush=True)
    from agent_lsp.server.main import serve

    return serve(tcp=getattr(args, "tcp", None), log_level=getattr(args, "log_level", "INFO"))


def _settings(args: argparse.Namespace, flags: dict[str, Any]) -> tuple[Settings | None, int]:
    from agent_lsp.settings import from_environment, from_user_file, resolve

    settings_file = getattr(args, "settings", None)
    if settings_file is not None and not settings_file.is_file():
        print(
            f"agent-lsp {args.command}: --settings {settings_file} is not a file", file=sys.stderr
        )
        return None, EXIT_USAGE
    user, problems = from_user_file(settings_file)
    settings, more = resolve(user, from_environment(), flags)
    for problem in problems + more:
        print(f"agent-lsp {args.command}: {_shown(problem)}", file=sys.stderr)
    return settings, 0


def _run(args: argparse.Namespace) -> int:
    from agent_lsp.terminal.run import run_headless

    if args.json and args.output_format not in (None, "json"):
        print("agent-lsp run: --json is --output-format json; give one of them", file=sys.stderr)
        return EXIT_USAGE
    output_format = "json" if args.json else args.output_format or "text"
    schema = None
    if args.output_schema is not None:
        from agent_lsp.agent.loop.structured import SchemaProblem, load_schema

        try:
            schema = load_schema(args.output_schema)
        except SchemaProblem as exc:
            print(f"agent-lsp run: --output-schema: {_shown(str(exc))}", file=sys.stderr)
            return EXIT_USAGE
    task = args.task
    if task == "-":  # the prompt from stdin: then there is no terminal to ask approvals on
        task = sys.stdin.read()
        if not task.strip():
            print("agent-lsp run: the prompt read from stdin is empty", file=sys.stderr)
            return EXIT_USAGE
    flags = {
        k: v
        for k, v in {
            "model": args.model,
            "baseUrl": args.base_url,
            "maxTurns": args.max_turns,
            "budget": None if args.max_budget_usd is None else {"maxCostUsd": args.max_budget_usd},
        }.items()
        if v is not None
    }
    settings, code = _settings(args, flags)
    if settings is None:
        return code
    if args.max_turns is not None and settings.max_turns != args.max_turns:
        return EXIT_USAGE
    worktree = None
    if args.worktree is not None:  # the run's workspace becomes its worktree (Decision 42)
        from agent_lsp.terminal.worktrees import enter_worktree

        entered = enter_worktree(args.worktree, args.workspace, args.session)
        if isinstance(entered, int):
            return entered
        worktree = entered
    return _interruptible(
        run_headless(
            task,
            worktree.workspace if worktree else args.workspace,
            settings,
            args.yes,
            session_id=args.session,
            mode=args.mode,
            worktree=worktree,
            output_format=output_format,
            output_schema=schema,
            prompt_from_stdin=args.task == "-",
        )
    )


def _shown(text: str) -> str:
    from agent_lsp.agent.display import for_terminal

    return for_terminal(text)


class _TerminalFormatter(logging.Formatter):
    """Log lines quote model output, file names and servers' errors: their control characters
    are escaped before they reach the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return _shown(super().format(record))


def _log_to_terminal() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_TerminalFormatter("agent-lsp: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def _interruptible(coro: Coroutine[Any, Any, int]) -> int:
    """asyncio.run, with a Ctrl-C outside the run's own handlers ending it as 130, quietly."""
    try:
        return asyncio.run(coro)
    except KeyboardInterrupt:
        print("\ncancelled", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
