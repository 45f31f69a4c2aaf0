"""The tools offered to the model (CONTRACT: read_file, list_files, search, diagnostics,
edit_file, write_file, run_command, delegate, remember, and the MCP servers' tools)."""

# Empty on purpose: importing one tool module must not import every other (no import cycles).
