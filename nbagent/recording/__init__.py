"""Record what a model produced, and play it back through the same loop with no network.

A :class:`Recording` holds, for each model request of a run, what the model side produced —
its stream events, coalesced (a step's text is one event, a call's streamed arguments another),
with their timing, the finish reason and usage — and a **fingerprint** of the request: the tool
definitions (names and hashes), the tool choice, the instructions and one hash per message.

* :func:`record` wraps any :class:`~nbagent.generation.Generator`; its ``.recording`` grows as
  the agent runs. :meth:`Recording.save` / :meth:`Recording.load` write and read the file.
* :attr:`Recording.history` keeps the conversation a notebook's run ended with, and
  :func:`conversation_of` reads it back checked against the recorded requests (a restarted
  kernel continues from it).
* :func:`cassette` records a test's model once and replays it after (``NBAGENT_RECORD=1``
  records afresh).
* :func:`replay` is a Generator that plays a recording back. Calls still go through the whole
  loop — validated, approved, **executed for real** — and their results are fed back. Each
  request is compared with the recorded fingerprint first: where the run departs from the
  recording (another tool set or schema, a different tool result, …) replay stops with
  :class:`~nbagent.errors.ReplayDivergedError` naming the step and what differed — or, given a
  ``fallback`` generator, goes on live from there.

The file is JSON, versioned (``"format": "nbagent-recording", "version": 1``), written with
sorted keys and one event per line so that a diff reads well. It holds what the model said,
hashes of what it was sent and (from the notebook) the conversation it ended with: no API
key, no header, no base URL, and credential-shaped text in the model's output and in the
conversation is replaced by ``***``. The format is documented in ``docs/howto/record.md``.

May import (docs/architecture.md): the ground, :mod:`nbagent.schema` and the vocabulary.
"""

from __future__ import annotations

from ._cassette import cassette
from ._conversation import Conversation, conversation_of
from ._format import FORMAT, VERSION, Recording, Step, fingerprint
from ._record import RecordingGenerator, record
from ._replay import Pace, ReplayGenerator, replay

__all__ = [
    "FORMAT",
    "VERSION",
    "Conversation",
    "Pace",
    "Recording",
    "RecordingGenerator",
    "ReplayGenerator",
    "Step",
    "cassette",
    "conversation_of",
    "fingerprint",
    "record",
    "replay",
]
