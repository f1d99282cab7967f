"""The incremental SSE decoder: every split, every line end, comments, multi-line data, UTF-8."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.providers._sse import SSEDecoder, loads

STREAM = (
    ": comment\n"
    "event: a\n"
    "data: héllo 🌍\n"
    "\n"
    "data:no space\n"
    "data:  two spaces\n"
    "data\n"
    "id: 7\n"
    "retry: 100\n"
    "\n"
    "\n"  # an empty event is not dispatched
    "event: lonely\n"
    "\n"  # an event name without data is not dispatched either
    "data: last\n"
    "\n"
)
EXPECTED = [("a", "héllo 🌍"), ("", "no space\n two spaces\n"), ("", "last")]


def decode(pieces: list[bytes]) -> list[tuple[str, str]]:
    decoder = SSEDecoder()
    events = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.flush())
    return [(name.decode(), data.decode()) for name, data in events]


def test_every_split_with_every_line_end() -> None:
    for eol in ("\n", "\r\n", "\r"):
        body = STREAM.replace("\n", eol).encode()
        assert decode([body]) == EXPECTED
        for at in range(len(body) + 1):
            assert decode([body[:at], body[at:]]) == EXPECTED, (eol, at)
        assert decode([body[i : i + 1] for i in range(len(body))]) == EXPECTED


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=200), max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_any_split_into_many_pieces(cuts: list[int], eol: str) -> None:
    body = STREAM.replace("\n", eol).encode()
    points = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert decode(pieces) == EXPECTED


def test_mixed_line_ends_in_one_stream() -> None:
    assert decode([b"data: a\r\n\ndata: b\r\r", b"data: c\n\r\n"]) == [
        ("", "a"),
        ("", "b"),
        ("", "c"),
    ]


def test_flush_completes_an_unterminated_last_event() -> None:
    assert decode([b"data: [DONE]"]) == [("", "[DONE]")]
    assert decode([b"data: x\n"]) == [("", "x")]
    assert decode([b"data: x\r"]) == [("", "x")]


def test_loads_is_strict_about_utf8_and_lenient_about_surrogates() -> None:
    assert loads('{"a": "é🌍"}'.encode()) == {"a": "é🌍"}
    with pytest.raises(UnicodeDecodeError):
        loads(b'{"a": "\xe2\x82"}')
    with pytest.raises(json.JSONDecodeError):
        loads(b'{"a": ')
    assert loads(b'{"a": "\\ud83c"}') == {"a": "\ud83c"}  # a lone surrogate escape


def test_utf8_split_inside_a_character_is_fine() -> None:
    body = "data: 🌍\n\n".encode()
    for at in range(len(body)):
        assert decode([body[:at], body[at:]]) == [("", "🌍")]
