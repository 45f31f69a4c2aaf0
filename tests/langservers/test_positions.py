"""Positions re-counted between UTF-16 (the source's callers) and a server's negotiated
encoding, on each position's own document (locations in other files, a rename's URI map,
call hierarchy ranges in the caller or the callee)."""

from __future__ import annotations

from agent_lsp.langservers.positions import convert, documents, from_index, to_index

A, B = "file:///a.py", "file:///b.py"
DOCS = {A: ["x = '😀é'; target = 1"], B: ["é = 2; target"]}


def pos(character: int, line: int = 0) -> dict:
    return {"line": line, "character": character}


def rng(start: int, end: int) -> dict:
    return {"start": pos(start), "end": pos(end)}


def test_offsets_in_each_encoding():
    line = DOCS[A][0]
    index = line.index("target")
    assert from_index(line, index, "utf-16") == 11 and from_index(line, index, "utf-8") == 14
    assert from_index(line, index, "utf-32") == 10
    for encoding in ("utf-8", "utf-16", "utf-32"):
        assert to_index(line, from_index(line, index, encoding), encoding) == index


def test_params_and_results_are_counted_on_their_own_document():
    lines = DOCS.get
    params = {"textDocument": {"uri": A}, "position": pos(11)}
    assert convert(params, A, lines, "utf-16", "utf-8")["position"] == pos(14)
    result = [{"uri": B, "range": rng(7, 13)}, {"uri": A, "range": rng(11, 17)}]
    back = convert([{"uri": B, "range": rng(8, 14)}, {"uri": A, "range": rng(14, 20)}], A, lines, "utf-8", "utf-16")
    assert back == result
    edit = {"changes": {B: [{"range": rng(8, 14), "newText": "t"}]}}
    assert convert(edit, A, lines, "utf-8", "utf-16")["changes"][B][0]["range"] == rng(7, 13)
    incoming = [{"from": {"uri": B, "range": rng(8, 14), "selectionRange": rng(8, 14)}, "fromRanges": [rng(8, 14)]}]
    converted = convert(incoming, A, lines, "utf-8", "utf-16")[0]
    assert converted["fromRanges"] == [rng(7, 13)] and converted["from"]["range"] == rng(7, 13)
    outgoing = [{"to": {"uri": B, "range": rng(8, 14)}, "fromRanges": [rng(14, 20)]}]  # ranges in the caller (A)
    assert convert(outgoing, A, lines, "utf-8", "utf-16")[0]["fromRanges"] == [rng(11, 17)]
    link = [{"targetUri": B, "targetRange": rng(8, 14), "targetSelectionRange": rng(8, 14),
             "originSelectionRange": rng(14, 20)}]
    assert convert(link, A, lines, "utf-8", "utf-16")[0]["originSelectionRange"] == rng(11, 17)
    assert convert(params, A, lambda uri: None, "utf-16", "utf-8") == params  # unreadable: as is


def test_the_documents_a_conversion_needs_are_named_before_it_reads_any():
    """The manager reads these (off the event loop, together) and converts from what it read."""
    incoming = [{"from": {"uri": B, "range": rng(8, 14)}, "fromRanges": [rng(8, 14)]}]
    assert documents(incoming, A) == {B}
    assert documents({"textDocument": {"uri": A}, "position": pos(11)}, B) == {A}
    outgoing = [{"to": {"uri": B, "range": rng(8, 14)}, "fromRanges": [rng(14, 20)]}]
    assert documents(outgoing, A) == {A, B}
    assert documents({"changes": {B: []}}, A) == set()  # no position: nothing to read
