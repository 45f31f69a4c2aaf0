"""Language servers agent-lsp starts itself (CONTRACT "Code intelligence", Decisions 38-39): the
code-intelligence source for stock clients, ACP and `agent-lsp run`. Outside the core: it
imports pygls's LSP client, and front ends plug it into the host."""
