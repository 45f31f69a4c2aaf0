"""Issue 20 item 8 (Decision 45): nothing the model, a file, a command or the state dir wrote
reaches the terminal as a control sequence. `agent-lsp run`, `sessions` and `rewind` run as
real subprocesses against the scripted model; what they print is checked byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.headless.test_run_cli import agent_run, run_cli, run_on_a_tty
from tests.unit.kit import call, tools_reply

pytestmark = pytest.mark.timeout(90)

# What a hostile text may hold, and how it must look once escaped.
VARIANTS = {
    "osc52-clipboard": ("\x1b]52;c;cm0gLXJmIH4K\x07", "\\e]52;c;cm0gLXJmIH4K\\x07"),
    "csi-cursor-up": ("\x1b[2A", "\\e[2A"),
    "conceal": ("\x1b[8m", "\\e[8m"),
    "c1-csi": ("\x9b2A", "\\x9b2A"),
}
RAW = ("\x1b", "\x9b", "\x07")


def assert_clean(output: str, escaped: str, where: str) -> None:
    for byte in RAW:
        assert byte not in output, f"{where}: a raw {byte!r} reached the terminal:\n{output!r}"
    assert escaped in output, f"{where}: the escaped form {escaped!r} is not shown:\n{output!r}"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_model_text_and_a_command_output_tail_reach_the_terminal_escaped(model, workspace, variant):
    raw, escaped = VARIANTS[variant]
    script = workspace / "emit.py"
    script.write_text(f"print('first line')\nprint({raw!r} + 'TAIL')\n")
    model.add([
        tools_reply(call("run_command", id="c", command=f"{sys.executable} emit.py"), text=f"before{raw}after "),
        {"text": f"done{raw}end"},
    ])
    proc = run_cli(agent_run(model, workspace, "go", json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_clean(proc.stdout, escaped, "stdout")
    assert f"before{escaped}after" in proc.stdout and f"done{escaped}end" in proc.stdout
    assert f"│ {escaped}TAIL" in proc.stdout, proc.stdout  # the command's last lines
    assert not any(b in proc.stderr for b in RAW), proc.stderr


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_session_title_in_agent_lsp_sessions_is_escaped(model, workspace, variant):
    raw, escaped = VARIANTS[variant]
    model.add([{"text": "ok"}])
    proc = run_cli(agent_run(model, workspace, f"task {raw} title"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    listing = run_cli([sys.executable, "-m", "agent_lsp", "sessions", "--workspace", str(workspace)])
    assert listing.returncode == 0, listing.stderr
    assert_clean(listing.stdout, escaped, "agent-lsp sessions")
    assert f"task {escaped} title" in listing.stdout
    # --json stays exact (JSON escapes every control character itself).
    as_json = run_cli([sys.executable, "-m", "agent_lsp", "sessions", "--workspace", str(workspace), "--json"])
    assert not any(b in as_json.stdout for b in RAW)
    assert json.loads(as_json.stdout)[0]["title"] == f"task {raw} title"


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_file_name_the_model_chose_is_escaped_in_the_report_and_in_rewind(model, workspace, variant):
    raw, escaped = VARIANTS[variant]
    name = f"evil{raw}.txt"
    model.add([tools_reply(call("write_file", path=name, content="x\n")), {"text": "wrote it"}])
    proc = run_cli(agent_run(model, workspace, "write", json_report=False))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (workspace / name).exists()
    assert_clean(proc.stdout, f"evil{escaped}.txt", "the run's report")
    run_id = proc.stdout.rsplit("transcript: ", 1)[1].strip().rsplit("/", 1)[1].removesuffix(".jsonl")
    rewound = run_cli([sys.executable, "-m", "agent_lsp", "rewind", run_id, "--workspace", str(workspace)])
    assert rewound.returncode == 0, rewound.stdout + rewound.stderr
    assert not (workspace / name).exists()
    assert_clean(rewound.stdout, f"evil{escaped}.txt", "agent-lsp rewind")


def ask_on_a_tty(model, workspace, answers: bytes) -> tuple[int, str, str]:
    """`agent-lsp run` with a terminal to ask on (stdin a pty), answering `answers`."""
    return run_on_a_tty(agent_run(model, workspace, "go", yes=False), answers)


def test_the_terminal_approval_prompt_escapes_the_detail(model, workspace):
    """The prompt a person answers: the detail (here a command) shows its escape sequence as
    text; a raw one could rewrite the lines above the question."""
    raw, escaped = VARIANTS["csi-cursor-up"]
    model.add([tools_reply(call("run_command", id="c", command=f"echo hi{raw}rm -rf ~")), {"text": "ok"}])
    code, out, err = ask_on_a_tty(model, workspace, b"d\n")
    assert code == 0, out + err
    assert "run_command wants to:" in err
    assert_clean(err, f"echo hi{escaped}rm -rf ~", "the approval prompt")


def test_a_long_detail_says_how_many_lines_are_not_shown_and_v_shows_them(model, workspace):
    """Issue 20 item 9: the prompt shows the first 40 lines of a detail; the rest is announced
    with its count (a diff's tail or an MCP call's last arguments are never silently dropped),
    and `v` shows the whole detail (for an edit: the whole diff) before asking again."""
    content = "".join(f"line {n}\n" for n in range(1, 101))
    model.add([tools_reply(call("write_file", id="w", path="long.txt", content=content)), {"text": "ok"}])
    code, out, err = ask_on_a_tty(model, workspace, b"v\nd\n")
    assert code == 0, out + err
    first_prompt, after = err.split("[v]iew all?", 1)
    shown = [line for line in first_prompt.splitlines() if line.startswith("      ")]
    # The first line, the diff's 3 header lines and 36 of its 100 added lines; then the count
    # of the rest (the whole diff: 1 + 3 + 100 lines).
    assert len(shown) == 41 and "+line 36" in first_prompt and "+line 37" not in first_prompt, first_prompt
    assert "… 64 more line(s) not shown (v shows them all)" in first_prompt
    assert "wants to (all 104 lines)" in after and "+line 100" in after  # v: every line, then the question again
    assert err.count("[a]llow / allow for [s]ession / [d]eny") == 2
    assert not (workspace / "long.txt").exists()  # d denied it


def test_a_long_detail_that_is_not_a_diff_is_counted_too():
    """An MCP call's arguments are a detail of many lines and no diff: the terminal approver
    (the real class, in its own process with a person's answers on stdin) counts the lines it
    does not show, `v` shows them, and the answer after it is the decision."""
    program = (
        "import asyncio, sys\n"
        "from agent_lsp.terminal.run import TerminalApprover\n"
        "from agent_lsp.agent.ports import ApprovalRequest\n"
        "detail = 'call mcp tool lookup with:\\n' + '\\n'.join(f'  arg{n}: value{n}' for n in range(1, 71))\n"
        "answer = asyncio.run(TerminalApprover(False, sys.stderr, True).ask(ApprovalRequest('c', 'mcp__x__lookup', detail)))\n"
        "print(answer.decision)\n")
    proc = subprocess.run([sys.executable, "-c", program], input="v\ns\n", capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    first, rest = proc.stderr.split("[v]iew all?", 1)
    assert "arg39: value39" in first and "arg40: value40" not in first
    assert "… 31 more line(s) not shown (v shows them all)" in first
    assert "arg70: value70" in rest and "(all 71 lines)" in rest
    assert proc.stdout.strip() == "allowSession", proc.stdout
