"""The "bare server" baseline: a pygls server that only answers `initialize` (start-up figure)."""

from pygls.lsp.server import LanguageServer

if __name__ == "__main__":
    LanguageServer("bare", "0").start_io()
