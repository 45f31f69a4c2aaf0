"""Decision 41's extraction of the answer's JSON: the whole answer, else its last ```json block,
else its last balanced {…}/[…] (brackets inside strings do not count)."""

from __future__ import annotations

import pytest

from agent_lsp.agent.loop.structured import Check, find_json


@pytest.mark.parametrize(("text", "value"), [
    ('  {"a": 1}\n', {"a": 1}),
    ("42", 42),
    ('x\n```json\n{"a": 1}\n```\ny\n```JSON\n[2]\n```\n', [2]),
    ('first {"a": 1} then {"b": "}{ ] ["} end', {"b": "}{ ] ["}),
    ('a list [1, [2, 3]] and a mismatched ( { ] here', [1, [2, 3]]),
    ('an object {"s": "a \\" quote } inside"}.', {"s": 'a " quote } inside'}),
    ('{"a": 1} and a footnote [not json]', {"a": 1}),
])
def test_the_json_of_an_answer(text, value):
    assert find_json(text) == value


@pytest.mark.parametrize(("text", "says"), [
    ("no json here", "no JSON value"),
    ("```json\n{oops}\n```", "not valid JSON"),
])
def test_an_answer_without_json_says_why(text, says):
    found = find_json(text)
    assert isinstance(found, Check) and not found.ok and says in found.errors[0]
