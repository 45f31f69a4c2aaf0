"""The terminal front end, beside `agent_lsp/server/` (LSP) and `agent_lsp/acp/` (ACP): `agent-lsp
run` (run.py, its stream shown in stream.py), `sessions` (sessions.py), `rewind` (rewind.py),
`doctor` (doctor.py), the folder a command works on (workspace.py) and the output shared by them
all (style.py). `agent_lsp/cli.py` parses the command line and hands over to these. No import
here: the package graph stays acyclic."""
