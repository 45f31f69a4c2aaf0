"""The agent's debugger (CONTRACT "The debugger (turn 4)"): a small DAP client and the debug
session one run may hold."""
