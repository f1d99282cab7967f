"""The incremental SSE decoder: every split, every line end, comments, multi-line data, UTF-8."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.providers._sse import EventTooLarge, SSEDecoder, loads

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


def test_loads_replaces_bad_utf8_says_so_and_is_lenient_about_surrogates() -> None:
    assert loads('{"a": "é🌍"}'.encode()) == ({"a": "é🌍"}, False)
    assert loads(b'{"a": "\xe2\x82"}') == ({"a": "\ufffd"}, True)
    assert loads(b'{"a": "x\xffy", "b": "ok"}') == ({"a": "x\ufffdy", "b": "ok"}, True)
    assert loads('{"a": "\ufffd"}'.encode()) == ({"a": "\ufffd"}, False)  # a real U+FFFD
    with pytest.raises(json.JSONDecodeError):
        loads(b'{"a": ')
    assert loads(b'{"a": "\\ud83c"}') == ({"a": "\ud83c"}, False)  # a lone surrogate escape


def test_loads_turns_too_deep_nesting_into_a_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        loads(b"[" * 100_000 + b"]" * 100_000)


# --- the size limit ------------------------------------------------------------------------------

LIMIT = 1024


def decode_limited(pieces: list[bytes]) -> list[tuple[str, str]]:
    decoder = SSEDecoder(LIMIT)
    events = []
    for piece in pieces:
        events.extend(decoder.feed(piece))
    events.extend(decoder.flush())
    return [(name.decode(), data.decode()) for name, data in events]


def test_a_line_up_to_the_limit_passes_at_every_split() -> None:
    line = b"data: " + b"x" * (LIMIT - 6)  # exactly LIMIT bytes
    body = line + b"\n\n" + b"data: next\n\n"
    expected = [("", "x" * (LIMIT - 6)), ("", "next")]
    for at in range(len(body) + 1):
        assert decode_limited([body[:at], body[at:]]) == expected, at


def test_a_line_over_the_limit_fails_at_every_split() -> None:
    body = b"data: " + b"x" * (LIMIT - 5) + b"\n\n"  # one byte too many
    for at in range(len(body) + 1):
        with pytest.raises(EventTooLarge, match="a line longer than 1,024 bytes"):
            decode_limited([body[:at], body[at:]])


def test_an_unterminated_line_fails_once_past_the_limit_without_holding_more() -> None:
    decoder = SSEDecoder(LIMIT)
    fed = 0
    failed = None
    for _ in range(10_000):  # a 1 MB line, 100 bytes at a time: it must stop near the limit
        fed += 100
        try:
            decoder.feed(b"y" * 100)
        except EventTooLarge as exc:
            failed = exc
            break
    assert failed is not None and fed <= LIMIT + 100


def test_an_event_of_many_lines_is_limited_as_a_whole() -> None:
    line = b"data: " + b"z" * 200 + b"\n"
    assert decode_limited([line * 4 + b"\n"]) == [("", "\n".join(["z" * 200] * 4))]
    with pytest.raises(EventTooLarge, match="an event with data longer than 1,024"):
        decode_limited([line * 6 + b"\n"])
    # the count starts again with each event
    assert len(decode_limited([(line * 4 + b"\n") * 5])) == 5


def test_utf8_split_inside_a_character_is_fine() -> None:
    body = "data: 🌍\n\n".encode()
    for at in range(len(body)):
        assert decode([body[:at], body[at:]]) == [("", "🌍")]


def test_a_byte_order_mark_that_opens_the_stream_is_skipped_at_every_split() -> None:
    # The SSE spec strips one leading U+FEFF; left in, it hides the first line's field name.
    for eol in ("\n", "\r\n", "\r"):
        body = (
            b"\xef\xbb\xbf" + STREAM.replace(": comment", "data: first").replace("\n", eol).encode()
        )
        expected = [("a", "first\nhéllo 🌍"), *EXPECTED[1:]]
        for at in range(len(body) + 1):
            assert decode([body[:at], body[at:]]) == expected, (eol, at)
        assert decode([body[i : i + 1] for i in range(len(body))]) == expected


def test_a_byte_order_mark_later_in_the_stream_is_data() -> None:
    assert decode([b"data: a\n\n\xef\xbb\xbfdata: b\n\ndata: \xef\xbb\xbfc\n\n"]) == [
        ("", "a"),
        ("", "\ufeffc"),
    ]


def test_empty_chunks_change_nothing() -> None:
    for eol in ("\n", "\r\n", "\r"):
        body = STREAM.replace("\n", eol).encode()
        for at in range(len(body) + 1):
            assert decode([body[:at], b"", body[at:]]) == EXPECTED, (eol, at)
