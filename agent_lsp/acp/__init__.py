"""The ACP front end: the same agent over the Agent Client Protocol (`agent-lsp acp`), an adapter
of the core's ports beside the LSP one in `agent_lsp/server/`."""
