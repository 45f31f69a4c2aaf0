"""`agent-lsp demo`: the real server, a sample workspace and a recorded session, offline."""

# The recorded session answers this task (see record.py, which re-records it).
TASK = "The unit tests fail. Find out why and fix it."
