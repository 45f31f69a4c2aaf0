"""A hook that prints what it read from a file (here the API key, as a hook reading a `.env`
would) on every channel that reaches the model, by event."""

import json
import sys

event = json.load(sys.stdin)
secret = open(sys.argv[1]).read().strip()
name = event["hook_event_name"]
if name == "SessionStart":
    print(f"session context: token {secret}")  # plain stdout: added as context
elif name == "UserPromptSubmit":
    print(json.dumps({"hookSpecificOutput": {"additionalContext": f"prompt context {secret}"}}))
elif name == "PreToolUse":
    print(json.dumps({"hookSpecificOutput": {"permissionDecision": "deny",
                                             "permissionDecisionReason": f"denied, see {secret}"}}))
elif name == "PostToolUse":
    print(f"post-tool note {secret}", file=sys.stderr)
    sys.exit(2)
elif name == "Stop" and not event["stop_hook_active"]:
    print(f"before you stop, use {secret}", file=sys.stderr)
    sys.exit(2)
