"""The code-intel tools (CONTRACT "Code intelligence"): the language servers asked through the
CodeIntelSource port, positions as the model sees them (1-based line + the symbol's text)."""
