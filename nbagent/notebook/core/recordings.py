"""Recordings in a notebook: each run recorded into a file beside the notebook, found again by
what the run asks, and replayed when no model is configured.

Where: ``nbagent-recordings/`` in the kernel's working directory (the notebook's folder in
JupyterLab, Notebook 7, VS Code, ``jupyter execute`` and nbclient given the notebook's path), or
``NBAGENT_RECORDINGS``. A kernel receives code, not the notebook: it cannot read a cell's
metadata or outputs, and nbclient clears them before a cell runs. A folder beside the notebook
is found by every frontend, survives saving, copying the folder, git and Binder.

Which: a run's file is named after its first request — a hash of the request's fingerprint
(the conversation so far with this prompt, the tools, the instructions and options: see
:func:`nbagent.recording.fingerprint`), with the prompt as a readable prefix. The same cell
asking the same thing after the same conversation finds its recording, wherever the cell moved;
a cell whose request changed (another tool schema, an edited prompt, a different earlier
result) finds none, and replay says which recording of the same prompt differs, and how.

When: with no model set (the offline stand-in), a run that has a recording replays it; a run
of a recorded prompt whose request departs from every recording of it fails, naming the first
difference (a new prompt runs on the stand-in). A model the cell names (``-m``) that cannot be
used here (no key) does not stop a run that has a recording: the recording replays. With a
real model set (a model string, ``-m`` or ``NBAGENT_MODEL``), a run is recorded (afresh). A model
set from Python (a ScriptedModel …) runs as it is. ``--record``,
``--replay`` and ``--live`` say it explicitly; ``--replay`` with a model configured continues live
from the first diverging step and saves the new recording.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..._digest import digest as _hash
from ...content import TextPart
from ...errors import RecordingError
from ...generation import Generator, Request
from ...messages import Message, UserMessage
from ...recording import Recording, RecordingGenerator, ReplayGenerator, fingerprint
from ...redact import redact_secrets

if TYPE_CHECKING:
    from ...agent import Agent
    from ...events import RunResult
    from ...recording import Pace

__all__ = [
    "Choice",
    "RecordMode",
    "RecordingStore",
    "choose",
    "model_configured",
    "model_text",
]

RecordMode = Literal["auto", "record", "replay", "live"]
#: Stop reasons whose runs are worth replaying (a failed or stopped run is not saved).
_KEEP = ("finished", "terminated", "max_steps", "length", "repeated_call")


def _slug(prompt: str) -> str:
    """The readable start of a recording's file name: a file name is no place for a key."""
    words = re.sub(r"[^a-z0-9]+", "-", redact_secrets(prompt).lower()).strip("-")
    return words[:40].rstrip("-") or "run"


class RecordingStore:
    """The recordings folder of this kernel (see the module docs).

    ``base``: the folder paths are shown relative to (default: the working directory when
    asked). A run uses :meth:`pinned`: its files stay where the run started, whatever its code
    does meanwhile (a snippet's ``os.chdir``, ``NBAGENT_RECORDINGS`` set in a tool)."""

    def __init__(self, folder: str | Path | None = None, *, base: Path | None = None) -> None:
        self._folder = Path(folder) if folder is not None else None
        self._base = base

    @property
    def folder(self) -> Path:
        if self._folder is not None:
            return self._folder
        configured = os.environ.get("NBAGENT_RECORDINGS", "").strip()
        return Path(configured) if configured else Path.cwd() / "nbagent-recordings"

    @property
    def base(self) -> Path:
        return self._base if self._base is not None else Path.cwd()

    def pinned(self) -> RecordingStore:
        """This store with its folder fixed now, as an absolute path, and paths shown relative
        to the working directory of now."""
        return RecordingStore(Path(os.path.abspath(self.folder)), base=Path(os.getcwd()))

    @staticmethod
    def key(request: Request) -> str:
        """The name a run's recording is filed under: a hash of its first request."""
        return _hash(fingerprint(request))

    @staticmethod
    def key_of(recording: Recording) -> str:
        """The key of a recording's file: the hash of its first step's fingerprint."""
        return _hash(recording.steps[0].request if recording.steps else {})

    def path_for(self, prompt: str, key: str) -> Path:
        return self.folder / f"{_slug(prompt)}-{key}.json"

    def find(self, request: Request) -> Path | None:
        """The recording of a run whose first request is ``request``, if there is one."""
        if not self.folder.is_dir():
            return None
        found = sorted(self.folder.glob(f"*-{self.key(request)}.json"))
        return found[0] if found else None

    def same_prompt(self, prompt: str) -> list[Path]:
        """Recordings of runs that began with this prompt (to explain a missing match)."""
        if not self.folder.is_dir():
            return []
        return sorted(self.folder.glob(f"{_slug(prompt)}-*.json"))

    def entries(self) -> list[tuple[Path, Recording | RecordingError]]:
        """Every recording in the folder, read (or the reason it could not be)."""
        if not self.folder.is_dir():
            return []
        out: list[tuple[Path, Recording | RecordingError]] = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                out.append((path, Recording.load(path, source=_shown(path))))
            except RecordingError as exc:
                out.append((path, exc))
        return out

    def save(self, recording: Recording, prompt: str) -> Path:
        """File ``recording`` under the fingerprint of its first step."""
        first = recording.steps[0].request if recording.steps else {}
        key = _hash(first)
        recording.prompt = redact_secrets(prompt)
        return recording.save(self.path_for(prompt, key))


def first_request(
    agent: Agent, prompt: str, tools: list[str] | None, *, fresh: bool = False
) -> Request:
    """The request a run of ``prompt`` will send first (as the loop builds it); ``fresh``: in a
    new conversation (``--new``)."""
    chosen = [agent.tools[n] for n in tools] if tools is not None else list(agent.tools.values())
    history = () if fresh else tuple(agent.messages)
    return Request(
        messages=(*history, UserMessage((TextPart(prompt),))),
        model=getattr(agent.generator, "model", ""),
        tools=tuple(t.definition for t in chosen),
        instructions=agent.instructions,
        options=agent.options,
    )


def _nothing(_result: RunResult | None) -> str | None:
    return None


@dataclass
class Choice:
    """The model a run uses (``None``: the agent's own) and what to do when it ends."""

    generator: Generator | None
    note: str
    finish: Callable[[RunResult | None], str | None]
    #: after the run: how it departed from the recording it replayed, if it ended early
    departed: Callable[[RunResult | None], str | None] = _nothing
    #: the recording it replays, as shown (relative to the notebook's folder)
    source: str | None = None
    #: the kernel is going away while the run waits: save what it recorded so far (the
    #: conversation ending with the calls waiting), so a restarted kernel offers them again
    unfinished: Callable[[list[Message]], str | None] = lambda _messages: None


def model_configured(spec: object) -> bool:
    """A real model is set: by ``-m``/``set_model`` as a model string, or by ``NBAGENT_MODEL``,
    and not the offline stand-in. (A Generator set from Python, such as a ScriptedModel, is
    not recorded unless asked: it is usually a stand-in itself.)"""
    if spec is None:
        spec = os.environ.get("NBAGENT_MODEL", "").strip() or None
    return isinstance(spec, str) and spec.strip().lower() != "offline"


def choose(
    agent: Agent,
    prompt: str,
    tools: list[str] | None,
    mode: RecordMode,
    store: RecordingStore,
    pace: Pace,
    configured: bool,
) -> Choice:
    """Decide how a run gets its model: live, live and recorded, or replayed (module docs).

    ``configured``: a real model is set (:func:`model_configured`). Raises
    :class:`RecordingError` when ``--replay`` finds nothing to replay, saying why.
    """
    if mode == "live":
        return Choice(None, "", _nothing)
    store = store.pinned()  # the run's files stay where it started (its code may os.chdir)
    request = first_request(agent, prompt, tools)
    if mode == "replay":
        found = store.find(request)
        if found is None:
            raise RecordingError(_missing(store, prompt, request))
        return _replaying(agent, prompt, tools, found, store, pace, continue_live=configured)
    if mode == "auto" and _offline(agent):
        found = store.find(request)
        if found is not None:
            return _replaying(agent, prompt, tools, found, store, pace, continue_live=False)
        if recorded(store, prompt):  # this prompt was recorded, but the run departs from it
            raise RecordingError(_missing(store, prompt, request, exact=True))
    if mode == "record" or (mode == "auto" and configured):
        recorder = RecordingGenerator(agent.generator)

        def after_record(result: RunResult | None) -> str | None:
            if result is None or result.stop_reason not in _KEEP or not recorder.recording.steps:
                return None
            recorder.recording.keep_history(agent.messages)  # a restart continues from it
            return _shown(store.save(recorder.recording, prompt), store.base)

        def unfinished(messages: list[Message]) -> str | None:
            if not recorder.recording.steps:
                return None
            recorder.recording.keep_history(messages)
            # not under the name a replay finds it by: Run All must not replay half a run
            path = store.path_for(prompt, f"{store.key_of(recorder.recording)}-waiting")
            return _shown(recorder.recording.save(path), store.base)

        return Choice(recorder, "recording", after_record, unfinished=unfinished)
    return Choice(None, "", _nothing)


def _offline(agent: Agent) -> bool:
    """No model is set: the agent runs on the offline stand-in (a model set from Python, such as
    a ScriptedModel, runs as it is unless --record or --replay says otherwise)."""
    from ...models import OfflineModel

    return isinstance(agent.generator, OfflineModel)


def _replaying(
    agent: Agent,
    prompt: str,
    tools: list[str] | None,
    found: Path,
    store: RecordingStore,
    pace: Pace,
    *,
    continue_live: bool,
) -> Choice:
    recording = Recording.load(found, source=_shown(found))  # not the author's home
    fallback = RecordingGenerator(agent.generator) if continue_live else None
    replayer = ReplayGenerator(
        recording,
        pace=pace,
        fallback=fallback,
        model=f"replay of {recording.model or 'a model'}, recorded {recording.created[:10]}",
    )

    def after_replay(result: RunResult | None) -> str | None:
        if fallback is None or replayer.diverged is None or result is None:
            return None
        if result.stop_reason not in _KEEP:
            return None
        kept = recording.steps[: replayer.diverged.step - 1]
        merged = Recording(
            [*kept, *fallback.recording.steps],
            model=fallback.recording.model,
            created=fallback.recording.created,
        )
        merged.keep_history(agent.messages)
        return _shown(store.save(merged, prompt), store.base)

    def departed(result: RunResult | None) -> str | None:
        if result is None or result.stop_reason in ("failed", "cancelled"):
            return None
        chosen = agent.tools if tools is None else {n: agent.tools[n] for n in tools}
        request = Request(
            messages=tuple(agent.messages),
            model="",
            tools=tuple(t.definition for t in chosen.values()),
            instructions=agent.instructions,
            options=agent.options,
        )
        return replayer.unplayed(request)

    return Choice(
        replayer, f"replaying {found.name}", after_replay, departed, _shown(found, store.base)
    )


def model_text(spec: Any) -> str | None:
    """The model a run is set to, as ``provider:name`` (None: the offline stand-in or a model
    object set from Python, which has no model string)."""
    from ...providers import model_id  # the face: a model string is resolved there alone

    if spec is not None and not isinstance(spec, str):
        return None
    try:
        provider, name = model_id(spec)
    except Exception:  # a setting that does not resolve is reported when the run loads it
        return spec.strip() if isinstance(spec, str) else None
    return None if provider == "offline" else f"{provider}:{name}"


def offer_again(
    agent: Agent, recording: Recording, store: RecordingStore, pace: Pace, configured: bool
) -> Choice:
    """A continued conversation whose last answer left calls waiting for approval (the kernel
    stopped): that answer is replayed from its recording, not asked of the model again, so the
    very calls are offered for approval again; the model (``configured``: recorded afresh)
    answers from the next request on, and the run is saved with the step it replayed first."""
    store = store.pinned()
    last = recording.steps[-1]
    one = Recording([last], model=recording.model, created=recording.created,
                    source=recording.source, repeat_guard=recording.repeat_guard)  # fmt: skip
    live = RecordingGenerator(agent.generator) if configured else None
    replayer = ReplayGenerator(one, pace=pace, fallback=live, model=recording.model or None)
    prompt = recording.prompt

    def after(result: RunResult | None) -> str | None:
        if live is None or result is None or result.stop_reason not in _KEEP:
            return None
        merged = Recording([last, *live.recording.steps], model=live.recording.model,
                           created=live.recording.created)  # fmt: skip
        merged.keep_history(agent.messages)
        return _shown(store.save(merged, prompt), store.base)

    return Choice(replayer, "", after)


def why_not_saved(error: BaseException) -> str:
    """Why a recording could not be written, as a notebook may show and save it: the reason
    and the path relative to the notebook (an OSError's own text holds the absolute path)."""
    if isinstance(error, OSError) and error.filename:
        return f"{error.strerror or type(error).__name__} ({_shown(Path(error.filename))})"
    return redact_secrets(str(error))


def _shown(path: Path, base: Path | None = None) -> str:
    """A recording's path as a notebook may show and save it: relative to the notebook's
    folder, ``base`` (an absolute path would carry the author's home directory into the
    notebook)."""
    try:
        return str(path.resolve().relative_to((base or Path.cwd()).resolve()))
    except ValueError:
        return path.name


def recorded(store: RecordingStore, prompt: str) -> list[tuple[Path, Recording]]:
    """The readable recordings of runs that began with exactly this prompt (as saved: with
    credential-shaped text as ``***``). A prompt nobody recorded is new, and runs offline; a
    recorded one whose run departs is an error that says how, not a silent offline answer."""
    shown = redact_secrets(prompt)
    out: list[tuple[Path, Recording]] = []
    for path in store.same_prompt(prompt):
        try:
            recording = Recording.load(path, source=_shown(path))
        except RecordingError:
            continue
        if recording.prompt == shown and recording.steps:
            out.append((path, recording))
    return out


def _closest(
    candidates: list[tuple[Path, Recording]], request: Request
) -> tuple[Path, Recording, str]:
    """The candidate whose first request is nearest ``request`` (the same tools first, then
    the longest shared start of the conversation), and the first difference, in words."""
    from ...recording._replay import _difference

    current = fingerprint(request)
    now = current["messages"]

    def nearness(item: tuple[Path, Recording]) -> tuple[bool, int, bool, str]:
        first = item[1].steps[0].request
        then = first.get("messages") or []
        shared = next((i for i, (a, b) in enumerate(zip(then, now, strict=False)) if a != b), None)
        shared = min(len(then), len(now)) if shared is None else shared
        same = [first.get(k) == current.get(k) for k in ("tools", "instructions", "options")]
        return (same[0], shared, all(same), item[0].name)

    path, recording = max(candidates, key=nearness)
    first = recording.steps[0].request
    difference = _difference(first, current, request) or "the request differs"
    return path, recording, difference


def _missing(store: RecordingStore, prompt: str, request: Request, *, exact: bool = False) -> str:
    """Why no recording replays: none for this prompt, or how the closest one differs.
    ``exact``: only recordings of exactly this prompt count (not merely a similar file name)."""
    where = _shown(store.folder)  # not the author's home directory
    candidates = recorded(store, prompt)
    if not candidates and not exact:
        candidates = []
        for path in store.same_prompt(prompt):
            try:
                found = Recording.load(path, source=_shown(path))
            except RecordingError as exc:
                return f"the recording of {prompt!r} cannot be used: {exc}"
            if found.steps:
                candidates.append((path, found))
    if not candidates:
        return (
            f"there is no recording of {prompt!r} in {where}: run the cell with a model "
            "configured (or with --record) to make one"
        )
    path, recording, difference = _closest(candidates, request)
    then = recording.steps[0].request.get("messages") or []
    now = fingerprint(request)["messages"]
    if len(now) > len(then) and list(now[len(now) - len(then) :]) == list(then):
        # recorded where the conversation began (at this cell, or a few cells up); here the
        # session's conversation holds more: these cells ran before in this kernel
        earlier = len(now) - len(then)
        return (
            f"the recording {path.name} was made in a conversation that began "
            f"{'at this cell' if len(then) == 1 else 'a few cells up'}, but this kernel's "
            f"conversation holds {earlier} earlier message{'s' if earlier != 1 else ''} (did "
            "these cells run before in this kernel?). Restart the kernel and run all cells "
            "(Kernel > Restart Kernel and Run All Cells), or begin the cell with --new to "
            "start a new conversation"
        )
    return (
        f"the recording {path.name} was made for another first request: {difference}. "
        "Run the cells before this one in order (Run All), re-record it with a model "
        "configured (or --record), undo the change, or use --live for the offline stand-in"
    )


def describe(store: RecordingStore) -> list[tuple[str, ...]]:
    """Rows for ``%agent recording``: file, prompt, model, date, steps (or what is wrong)."""
    rows: list[tuple[str, ...]] = []
    for path, found in store.entries():
        if isinstance(found, RecordingError):
            rows.append((path.name, "", "", "", f"unusable: {found}"))
            continue
        rows.append(
            (
                path.name,
                found.prompt,
                found.model,
                found.created[:19],
                str(len(found.steps)),
            )
        )
    return rows
