"""A typed run's answer in the live card: its fields filling in as it streams, then the value.

The answer arrives as JSON text (the provider's structured output) or as the ``final_answer``
call's arguments (see :mod:`nbagent.output`); either way :class:`LiveAnswer` keeps what has
arrived and, at the view's bounded rate, shows the best parse of it
(:func:`~nbagent._ground.textbuf.parse_partial_json`, jiter's partial mode: an unfinished string
shows as far as it came) as a field/value table. A last word that could still become a credential
waits, as in every stream (:func:`~.stream.sendable`), and every value is escaped with secrets
hidden. When the run ends with a validated value, that value replaces it; a run that ends
without one says the value shown was never validated.

Bounded: past :data:`MAX_TEXT` characters the answer is no longer parsed as it streams (its
size is said instead, and the value shows once validated).
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets

from ..._ground.textbuf import parse_partial_json
from ..saved.answerview import answer_forms, filling_html
from .stream import sendable

__all__ = ["MAX_TEXT", "LiveAnswer"]

#: How much of a streaming answer is parsed to show it filling in (characters).
MAX_TEXT = 1_000_000


class LiveAnswer(widgets.HTML):  # type: ignore[misc]
    """The answer's block in the card; fed text with :meth:`append`, shown by :meth:`flush`
    (the view's rate), like the text streams beside it."""

    def __init__(self, wrapped: bool, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.add_class("nbagent-answer")
        self._wrapped = wrapped
        self._parts: list[str] = []
        self._size = 0
        self._pending = 0
        self._over = False
        self._shown: tuple[Any, str] = (None, "")
        self._html = ""
        self.streaming = True

    @property
    def pending_chars(self) -> int:
        return self._pending

    def restart(self) -> None:
        """Another try at the answer (the last one was not accepted): start again."""
        self._parts, self._size, self._pending, self._over = [], 0, 0, False
        self.streaming = True

    def append(self, text: str) -> None:
        if not text or self._over:
            return
        if self._size + len(text) > MAX_TEXT:
            self._over = True
            self._pending = 1
            return
        self._parts.append(text)
        self._size += len(text)
        self._pending += len(text)

    def flush(self, *, everything: bool = False) -> bool:
        """Show what has arrived; True if the block changed."""
        if not self._pending:
            return False
        self._pending = 0
        if self._over:
            self._shown = (None, f"({self._size:,}+ characters so far: shown once validated)")
            shown = filling_html(*self._shown)
        else:
            text = "".join(self._parts)
            self._parts = [text]
            if not everything:
                text = text[: sendable(text)]
            value = parse_partial_json(text)
            if self._wrapped:
                value = value.get("value") if isinstance(value, dict) else None
            self._shown = (value, text)
            shown = filling_html(value, text)
        if shown == self._html:
            return False
        self._html = self.value = shown
        return True

    def finish(self) -> None:
        self.flush(everything=True)
        self.streaming = False

    def validated(self, value: Any) -> None:
        """The run's validated answer (as JSON) replaces what streamed."""
        self._parts, self._pending, self.streaming = [], 0, False
        self.value = answer_forms(value)[0]

    def unvalidated(self, why: str) -> None:
        """The run ended without a validated answer: the value shown is what arrived."""
        self.finish()
        note = f'<div style="opacity:0.7"><i>{html.escape(why)}</i></div>'
        self.value = filling_html(*self._shown, state="not validated") + note
