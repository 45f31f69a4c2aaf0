"""`python -m agent_lsp` is the `agent-lsp` command."""

from agent_lsp.cli import main

raise SystemExit(main())
