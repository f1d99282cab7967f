"""Record once, replay ever after: recordings as test fixtures (cassette style)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from ..errors import RecordingError
from ..generation import Generator
from ._record import RecordingGenerator, record
from ._replay import Pace, replay

__all__ = ["cassette"]

Mode = Literal["auto", "record", "replay"]


def _mode(explicit: Mode | None) -> Mode:
    if explicit is not None:
        return explicit
    forced = os.environ.get("NBAGENT_RECORD", "").strip().lower()
    if forced in ("1", "true", "yes", "record"):
        return "record"
    if forced in ("0", "false", "no", "replay"):
        return "replay"
    return "auto"


@contextmanager
def cassette(
    path: str | Path,
    live: Generator | Callable[[], Generator] | None = None,
    *,
    mode: Mode | None = None,
    pace: Pace = "instant",
) -> Iterator[Generator]:
    """A Generator for a test: it replays ``path``, or records it from ``live`` first.

    ``auto`` (the default) records when the file does not exist yet and replays otherwise;
    ``NBAGENT_RECORD=1`` (or ``mode="record"``) records afresh, ``NBAGENT_RECORD=0`` (or
    ``mode="replay"``) never records. ``live`` is a Generator or a function that makes one
    (called only when recording, so a replay needs no key). The file is written when the block
    ends without an exception, so an assertion that fails inside it leaves no recording (a
    pytest fixture yielding from inside the block is resumed whatever the test's outcome: keep
    the assertions in the block).
    """
    target = Path(path)
    chosen = _mode(mode)
    if chosen == "record" or (chosen == "auto" and not target.exists()):
        if live is None:
            raise RecordingError(
                f"there is no recording at {target} and no live model to record one: pass "
                "live=... (a Generator, or a function that makes one)"
            )
        generator = live if isinstance(live, Generator) else live()
        recorder: RecordingGenerator = record(generator)
        yield recorder
        recorder.recording.save(target)
        return
    if not target.exists():
        raise RecordingError(
            f"there is no recording at {target} (replay only): record it first, e.g. with "
            "NBAGENT_RECORD=1 and a live model"
        )
    yield replay(target, pace=pace)
