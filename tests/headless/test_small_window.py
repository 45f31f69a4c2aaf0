"""Issue 32: with the code-intel tools offered, a small `contextWindow` (6,000 tokens) does not
stop a run `fatal` when one tool result is big: the newest result is cut to fit (the whole of it
stays readable in its spill file), and the run says at start how much of the window the tool
schemas alone take."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from tests.headless.test_run_cli import agent_run, report_of, run_cli
from tests.langservers.conftest import FAKE
from tests.unit.kit import call, last_tool_results, tools_reply

pytestmark = pytest.mark.timeout(90)


def test_a_big_result_in_a_small_window_with_code_intel_completes(model, workspace):
    big = "".join(f"line {n}: {'x' * 70}\n" for n in range(400))  # ~32,000 characters
    (workspace / "big.txt").write_text(big)
    settings = {
        "contextWindow": 6000,
        "languageServers": {"auto": False, "servers": {
            "fake": {"command": [sys.executable, str(FAKE), "ok"], "extensions": [".py"]}}},
    }
    with open(os.environ["AGENT_LSP_SETTINGS"], "w") as handle:
        json.dump(settings, handle)
    # The endpoint counts the tool schemas in its prompt tokens (as real ones do).
    first = tools_reply(call("run_command", "big", command="cat big.txt"), usage={"prompt_tokens": 3600})
    model.add([first, {"text": "read it"}])

    proc = run_cli(agent_run(model, workspace, "read big.txt"))

    report = report_of(proc.stdout)
    assert report["stopReason"] == "done", report
    assert proc.returncode == 0, proc.stderr
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "find_references" in offered, offered
    result = last_tool_results(model.requests[1])["big"]
    assert "line 0:" in result and "line 399:" in result  # its head and tail, cut in the middle
    assert "contextWindow" in result and "read_file" in result  # why it was cut, and the rest
    assert "tool schemas" in proc.stderr  # said at start: the tools alone take much of the window
    spill = re.search(r"saved at (\S+-fit\.txt)", result)
    assert spill is not None, result
    # What was cut is there to read: the cut result's text, which names the whole output's file.
    fitted = Path(spill.group(1)).read_text()
    whole = re.search(r"saved at (\S+\.txt)", fitted)
    assert whole is not None and "line 200:" in Path(whole.group(1)).read_text(), fitted[:300]
