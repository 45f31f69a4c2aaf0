"""MCP servers' tools for the agent, through the official `mcp` SDK (imported only when a server
starts). Empty on purpose: import the module you need (no import cycles)."""
