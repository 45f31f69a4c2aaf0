#!/usr/bin/env python3
"""A PreToolUse hook on Bash in Claude Code's documented style: read the event from stdin,
refuse recursive forced deletes with exit 2 (stderr is the reason the model reads)."""
import json
import re
import sys

event = json.load(sys.stdin)
command = event.get("tool_input", {}).get("command", "")
if event.get("tool_name") == "Bash" and re.search(r"\brm\s+(-[a-zA-Z]*[rR][a-zA-Z]*f|-[a-zA-Z]*f[a-zA-Z]*[rR])\b", command):
    print("Blocked by policy: recursive forced delete (rm -rf) is not allowed here", file=sys.stderr)
    sys.exit(2)
sys.exit(0)
