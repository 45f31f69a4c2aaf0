"""`agent-lsp`: serve (the language server) | run (headless) | demo | --version. Thin."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from agent_lsp import __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-lsp", description="An LLM coding agent served over the Language Server Protocol.")
    parser.add_argument("--version", action="version", version=f"agent-lsp {__version__}")
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run the language server (default: on stdio)")
    mode = serve.add_mutually_exclusive_group()
    mode.add_argument("--stdio", action="store_true", help="talk LSP on stdin/stdout (default)")
    mode.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP address, for debugging")
    serve.add_argument("--log-level", default="INFO", help="stderr log level (default INFO)")
    run = sub.add_parser("run", help="run the agent headless in this terminal")
    run.add_argument("task", help="what the agent should do")
    run.add_argument("--workspace", type=Path, default=Path.cwd(), help="workspace folder (default: the current directory)")
    run.add_argument("--yes", action="store_true", help="approve every side effect without asking")
    run.add_argument("--model", help="model name, or replay:PATH")
    run.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    run.add_argument("--max-turns", type=int, help="LLM calls before the max_turns stop")
    run.add_argument("--json", action="store_true", help="print the run report as JSON")
    demo = sub.add_parser("demo", help="a two-minute offline tour: the real server, a recorded session, no API key")
    demo.add_argument("--yes", action="store_true", help="approve every step without asking")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in (None, "serve"):
        from agent_lsp.server.main import serve

        return serve(tcp=getattr(args, "tcp", None), log_level=getattr(args, "log_level", "INFO"))
    if args.command == "run":
        return _run(args)
    if args.command == "demo":
        from agent_lsp.demo.driver import run_demo

        return run_demo(yes=args.yes)
    return 2


def _run(args: argparse.Namespace) -> int:
    from agent_lsp.headless import run_headless
    from agent_lsp.settings import from_environment, resolve

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="agent-lsp: %(message)s")
    if not args.workspace.is_dir():
        print(f"agent-lsp run: --workspace {args.workspace} is not a directory", file=sys.stderr)
        return 2
    flags = {k: v for k, v in {"model": args.model, "baseUrl": args.base_url, "maxTurns": args.max_turns}.items() if v is not None}
    settings, problems = resolve(from_environment(), flags)
    for problem in problems:
        print(f"agent-lsp run: {problem}", file=sys.stderr)
    if args.max_turns is not None and settings.max_turns != args.max_turns:
        return 2
    return asyncio.run(run_headless(args.task, args.workspace, settings, args.yes, args.json))


if __name__ == "__main__":
    sys.exit(main())
