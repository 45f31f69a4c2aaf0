#!/usr/bin/env bash
# Stop: the first time, make the agent go on; once it went on (stop_hook_active), let it stop.
if [[ "$(jq -r '.stop_hook_active')" == "true" ]]; then exit 0; fi
echo "Before you stop: run the tests and say whether they pass." >&2
exit 2
