#!/usr/bin/env bash
# PreToolUse: deny through JSON output (exit 0, hookSpecificOutput.permissionDecision).
cmd=$(jq -r '.tool_input.command // empty')
if [[ "$cmd" == *"rm -rf"* ]]; then
  jq -n --arg r "rm -rf is denied by the deny_json hook" \
    '{hookSpecificOutput: {hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: $r}}'
fi
exit 0
