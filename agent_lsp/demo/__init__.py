"""`agent-lsp demo`: the real server, a sample workspace and a recorded session, offline."""
