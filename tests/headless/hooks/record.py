#!/usr/bin/env python3
"""Any event: append what arrived on stdin (and a few variables) to the file named by argv[1]."""
import json
import os
import sys

event = json.load(sys.stdin)
event["_env"] = {k: os.environ.get(k) for k in ("CLAUDE_PROJECT_DIR", "AGENT_LSP_PROJECT_DIR")}
event["_env_has_key"] = any("sk-test-secret-key" in v for v in os.environ.values())
event["_env_key_var"] = "OPENAI_API_KEY" in os.environ
event["_cwd"] = os.getcwd()
with open(sys.argv[1], "a") as out:
    out.write(json.dumps(event) + "\n")
