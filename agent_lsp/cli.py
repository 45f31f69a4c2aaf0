"""`agent-lsp`: serve (the language server) | run (headless) | sessions | worktrees | rewind |
doctor | acp | demo | --version. Thin: parsed with cli_parser.py, each command hands over to its
module."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_lsp.settings import Settings

EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 128 + 13  # as if ended by SIGPIPE, like `git log | head -1`
TTY_HINT = (
    "agent-lsp speaks the Language Server Protocol on stdin/stdout "
    "and is meant to be started by an editor "
    '(see README.md). In a terminal, try `agent-lsp run "TASK"` or `agent-lsp demo`, '
    "or `agent-lsp chat` to talk to it here. Ctrl-C exits."
)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["run"]:
        from agent_lsp.terminal import startup  # no cyclic collector until its first model call

        startup.pause()
    # Before anything else runs or starts a child: the key out of the environment block and of
    # every child's environment, the process non-dumpable (Decision 45). The settings' own
    # `apiKeyEnv` is taken out when a front end resolves its settings.
    from agent_lsp.agent.exec.keyguard import seal_process

    seal_process()
    # How editors start it: skip argparse (start-up time).
    if given in ([], ["serve"], ["serve", "--stdio"]):
        return _serve(argparse.Namespace(tcp=None, log_level="INFO"))
    try:
        args = _parse(argv)
        if args.command not in (None, "serve", "acp"):
            return _command(args)
    except BrokenPipeError:
        return _reader_gone()
    if args.command == "acp":
        from agent_lsp.acp.main import serve_acp

        _log_to_terminal()
        return serve_acp()
    return _serve(args)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from agent_lsp.cli_parser import build_parser

    try:
        return build_parser().parse_args(argv)
    finally:
        sys.stdout.flush()  # --help, --version: a closed pipe shows here, not at exit


def _reader_gone() -> int:
    """stdout's reader left (`agent-lsp sessions | head -1`): end quietly, as a command killed
    by SIGPIPE does, with what is still buffered going nowhere (not a traceback at exit)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE


def _command(args: argparse.Namespace) -> int:
    """A terminal command (not a protocol server on stdio); its output flushed before it ends,
    so a reader that left is seen here."""
    try:
        return _terminal_command(args)
    finally:
        sys.stdout.flush()


def _terminal_command(args: argparse.Namespace) -> int:
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
    if args.command == "chat":
        return _chat(args)
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
    if args.session is not None:
        from agent_lsp.agent.state.sessions import InvalidSessionId, check_session_id

        try:
            check_session_id(args.session)
        except InvalidSessionId as exc:
            print(f"agent-lsp run: --session: {_shown(str(exc))}", file=sys.stderr)
            return EXIT_USAGE
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


def _chat(args: argparse.Namespace) -> int:
    from agent_lsp.terminal.chat import chat_in_terminal

    if args.session is not None:
        from agent_lsp.agent.state.sessions import InvalidSessionId, check_session_id

        try:
            check_session_id(args.session)
        except InvalidSessionId as exc:
            print(f"agent-lsp chat: --session: {_shown(str(exc))}", file=sys.stderr)
            return EXIT_USAGE
    flags = {
        k: v for k, v in {"model": args.model, "baseUrl": args.base_url}.items() if v is not None
    }
    settings, code = _settings(args, flags)
    if settings is None:
        return code
    return _interruptible(
        chat_in_terminal(args.workspace, settings, session_id=args.session, mode=args.mode)
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
