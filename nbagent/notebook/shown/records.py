"""The records of one run a transcript keeps: streamed text and reasoning, notes, and each tool
call as the person saw it (:class:`CallRecord`). Plain values, filled in by
:class:`~.transcript.Transcript` from the run's events, read by every view and by
:mod:`.static`, which saves them; put into words by :mod:`.wording`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from ...approvals.approval import Decision
    from ...content import ToolResult
    from ...events import ToolPreviewed

__all__ = [
    "Block",
    "CallRecord",
    "Change",
    "NoteRecord",
    "ReasoningRecord",
    "TextRecord",
]


class _Pieces:
    """Streamed text kept as its pieces and joined when read: ``text += piece`` on an
    attribute copies the whole text each time (300,000 pieces would take minutes)."""

    __slots__ = ("_pieces", "step")

    def __init__(self, step: int, text: str = "") -> None:
        self.step = step
        self._pieces: list[str] = [text] if text else []

    def add(self, piece: str) -> None:
        self._pieces.append(piece)

    @property
    def text(self) -> str:
        if len(self._pieces) > 1:
            self._pieces[:] = ["".join(self._pieces)]
        return self._pieces[0] if self._pieces else ""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Pieces) or type(other) is not type(self):
            return False
        return (other.step, other.text) == (self.step, self.text)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(step={self.step!r}, text={self.text!r})"


class TextRecord(_Pieces):
    """Assistant text of one step."""

    __slots__ = ()


class ReasoningRecord(_Pieces):
    """Model reasoning ("thinking") of one step, as it streamed."""

    __slots__ = ()


@dataclass
class NoteRecord:
    """Something the loop did that is not text or a call: a retried step."""

    step: int
    text: str


@dataclass(frozen=True)
class Change:
    """Who changed a call's arguments before it ran ("person" or "hook"), and from what to what."""

    by: str
    previous: Any
    arguments: Any
    hook: str | None = None

    @property
    def who(self) -> str:
        return f"hook {self.hook}" if self.by == "hook" else "you"


@dataclass
class CallRecord:
    """One tool call as the person saw it.

    ``waited`` is the time the call spent waiting for a decision, ``ran`` the time its function
    ran: the two are never added up. ``abandoned`` is set when the run stopped but the function
    could not be stopped (a thread); ``ended_late`` says when it finally returned.
    ``input`` is what the model proposed; ``executed`` what ran (after edits and hooks, see
    ``changes``); ``result`` is the tool's own result and ``model_result`` what the model read
    instead, when that differs (a note about changed arguments, an after-tool hook).
    """

    call_id: str
    name: str
    step: int = 0
    title: str | None = None
    parts: list[str] = field(default_factory=list, repr=False)
    input: Any = None
    status: str = "streaming"
    approval_asked: bool = False
    asked_at: float | None = None
    waited: float = 0.0
    decision: Decision | None = None
    result: ToolResult | None = field(default=None, repr=False)
    is_error: bool = False
    started: float | None = None
    ran: float = 0.0
    progress: str = ""
    traceback: str | None = None
    abandoned: bool = False
    ended_late: float | None = None
    executed: Any = None
    changes: list[Change] = field(default_factory=list)
    hook_notes: list[str] = field(default_factory=list)
    #: What was done with the call's effects afterwards (a served snippet undone), in order.
    later: list[str] = field(default_factory=list)
    preview: ToolResult | None = field(default=None, repr=False)
    preview_status: str = ""
    has_preview: bool = False
    #: The newest preview of an edit the person asked to see (revision ≥ 1), if any.
    edit_preview: ToolPreviewed | None = field(default=None, repr=False)
    timeout: float | None = None
    model_result: ToolResult | None = field(default=None, repr=False)
    #: Arguments that hold code, and their language (from the tool's ``code_arguments``).
    code_arguments: dict[str, str] = field(default_factory=dict)
    #: The same call with the same result, this many times in a row (its repeats are folded
    #: into this record: ``repeats`` names them); 0 when it was not repeated.
    times: int = 0
    repeats: list[str] = field(default_factory=list)
    #: Set on a repeat folded into another call's record: that call's id.
    repeat_of: str | None = None

    def code(self) -> tuple[str, str, str, Any] | None:
        """``(argument, language, code, other arguments)`` of a call whose tool takes code, once
        its arguments are known and the code is a string; else None."""
        if not self.code_arguments or not isinstance(self.input, dict):
            return None
        for name, language in self.code_arguments.items():
            value = self.input.get(name)
            if isinstance(value, str):
                rest = {k: v for k, v in self.input.items() if k != name}
                return name, language, value, rest
        return None

    @property
    def open(self) -> bool:
        return self.status in ("streaming", "ready", "waiting", "running")

    @property
    def arguments(self) -> str:
        """The arguments as the model wrote them (joined once per call, not per fragment)."""
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""

    @arguments.setter
    def arguments(self, text: str) -> None:
        self.parts[:] = [text]

    @property
    def result_text(self) -> str:
        return self.result.text if self.result is not None else ""


Block = Union[TextRecord, ReasoningRecord, NoteRecord, CallRecord]
