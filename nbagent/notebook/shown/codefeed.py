"""CodeFeed: the code inside a call's streaming JSON arguments, decoded as it arrives.

A tool that takes code (``code_arguments={"code": "python"}``) is shown as that code, not as a
JSON string full of ``\\n`` and ``\\"``. The arguments arrive in fragments cut anywhere (inside
a key, an escape, a surrogate pair), so this reads them with a small state machine over the top
level of a JSON object: each fragment is read once, and only the characters of the wanted
string value come out, unescaped. Anything it cannot follow (not an object, a key given twice)
makes it give up; the card then shows the arguments as they are.
"""

from __future__ import annotations

__all__ = ["CodeFeed"]

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class CodeFeed:
    """Feed argument fragments; get back the newly decoded text of the ``wanted`` key."""

    __slots__ = (
        "_depth",
        "_escape",
        "_high",
        "_in_string",
        "_key",
        "_seen",
        "_state",
        "failed",
        "found",
        "wanted",
    )

    def __init__(self, wanted: str) -> None:
        self.wanted = wanted
        self.failed = False
        self.found = False
        self._state = "start"  # start, key?, key, colon, value?, target, skip, other, after
        self._key: list[str] = []
        self._escape: str | None = None  # an escape being read ("" after the backslash)
        self._high: int | None = None  # a high surrogate waiting for its low half
        self._depth = 0  # nesting inside a skipped value
        self._in_string = False  # inside a string of a skipped value
        self._seen: set[str] = set()

    def feed(self, fragment: str) -> str:
        """The decoded characters of the wanted value that this fragment completes."""
        if self.failed:
            return ""
        out: list[str] = []
        for char in fragment:
            if not self._step(char, out):
                self.failed = True
                return "".join(out)
        return "".join(out)

    def _step(self, char: str, out: list[str]) -> bool:
        state = self._state
        if state == "target":
            return self._string_char(char, out, target=True)
        if state == "key":
            return self._string_char(char, self._key, target=False)
        if state == "skip":  # a string value of another key
            return self._string_char(char, None, target=False)
        if state == "other":
            return self._other(char)
        if char in " \t\r\n":
            return True
        if state == "start":
            self._state = "key?"
            return char == "{"
        if state == "key?":
            if char == "}":
                self._state = "done"
                return True
            if char != '"':
                return False
            self._key = []
            self._state = "key"
            return True
        if state == "colon":
            self._state = "value?"
            return char == ":"
        if state == "value?":
            key = "".join(self._key)
            if key in self._seen:
                return False  # a key given twice: what would run is not clear
            self._seen.add(key)
            if char == '"':
                self._state = "target" if key == self.wanted else "skip"
                self.found = self.found or key == self.wanted
                return True
            self._state, self._depth, self._in_string = "other", 0, False
            return self._other(char)
        if state == "after":
            if char == ",":
                self._state = "key?"
                return True
            if char == "}":
                self._state = "done"
                return True
            return False
        return state == "done"  # nothing may follow the object but whitespace

    def _string_char(self, char: str, out: list[str] | None, *, target: bool) -> bool:
        escape = self._escape
        if escape is not None:
            if escape == "":
                if char == "u":
                    self._escape = "u"
                    return True
                decoded = _ESCAPES.get(char)
                if decoded is None:
                    return False
                self._escape = None
                self._put(decoded, out)
                return True
            escape += char  # "uXXXX" as it fills
            if len(escape) < 5:
                self._escape = escape
                return True
            self._escape = None
            try:
                code = int(escape[1:], 16)
            except ValueError:
                return False
            self._put_code(code, out)
            return True
        if char == "\\":
            self._escape = ""
            return True
        if char == '"':
            if self._high is not None:
                self._put("\ufffd", out)
                self._high = None
            if self._state == "key":
                self._state = "colon"
            else:
                self._state = "after"
            return True
        self._put(char, out)
        return True

    def _put_code(self, code: int, out: list[str] | None) -> None:
        if 0xD800 <= code <= 0xDBFF:
            if self._high is not None:
                self._put("\ufffd", out)
            self._high = code
            return
        if 0xDC00 <= code <= 0xDFFF and self._high is not None:
            combined = 0x10000 + ((self._high - 0xD800) << 10) + (code - 0xDC00)
            self._high = None
            self._put(chr(combined), out)
            return
        self._put(chr(code) if not 0xD800 <= code <= 0xDFFF else "\ufffd", out)

    def _put(self, text: str, out: list[str] | None) -> None:
        if self._high is not None:
            self._high = None
            text = "\ufffd" + text
        if out is not None:
            out.append(text)

    def _other(self, char: str) -> bool:
        """Skip a value that is not a string (a number, true, an object, an array)."""
        if self._in_string:
            if self._escape is not None:
                self._escape = None
            elif char == "\\":
                self._escape = ""
            elif char == '"':
                self._in_string = False
            return True
        if char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            if self._depth == 0:
                if char != "}":
                    return False
                self._state = "done"
                return True
            self._depth -= 1
        elif char == "," and self._depth == 0:
            self._state = "key?"
        return True
