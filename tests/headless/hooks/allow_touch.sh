#!/usr/bin/env bash
# PreToolUse: let `touch` run without a prompt.
cmd=$(jq -r '.tool_input.command // empty')
if [[ "$cmd" == touch\ * ]]; then
  echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "permissionDecisionReason": "touch is harmless"}}'
fi
exit 0
