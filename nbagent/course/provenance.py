"""The provenance record an ``%agent`` cell carries: what ran, on which model, under which policy.

The notebook front end writes one :class:`Provenance` per run into the ``metadata["nbagent"]`` of
the run's final output (nbformat keeps output metadata when the notebook is saved); the class
report reads it back from submitted notebooks with :func:`from_metadata`. ``%agent cells`` and
``%agent undo`` write a smaller :class:`FollowUp` (which runs' code became cells, or was undone),
read with :func:`follow_up_from_metadata`.

Both shapes are versioned JSON objects (``"version": 1``), every value bounded: strings are cut
to their limit when written, lists keep at most 200 items and say how many there were. The
record holds nothing the cell does not already show, and the prompt and code pass through
:func:`nbagent.redact.redact_secrets` before they are kept.

A submitted notebook is untrusted, so the readers are strict: an unknown or missing key, a value
of the wrong type or over its bound, a digest that is not ``sha256:`` and 64 hex digits, is a
:class:`ProvenanceError` naming the key, never a value taken on trust or quietly fixed.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..redact import redact_secrets

__all__ = [
    "CallRecord",
    "FollowUp",
    "StepRecord",
    "Provenance",
    "ProvenanceError",
    "SnippetRecord",
    "follow_up_from_metadata",
    "from_metadata",
    "is_follow_up",
    "read_output",
    "sha256_digest",
    "utc_now",
]

VERSION = 1
#: The key, in an output's (or a cell's) metadata, that holds the record.
KEY = "nbagent"
MAX_ITEMS = 200
MAX_PROMPT = 500
MAX_CODE = 2000
#: Characters kept of a served call's arguments and of its result.
MAX_ASKED = 300

Mode = Literal["live", "replayed", "offline", "served"]
Decision = Literal["approved", "edited", "denied", "rule", "auto", "not asked"]
Kept = Literal["cells", "undone", "kept"]
Action = Literal["cells", "undone"]

_MODES: tuple[str, ...] = get_args(Mode)
_DECISIONS: tuple[str, ...] = get_args(Decision)
_KEPT: tuple[str, ...] = get_args(Kept)
_ACTIONS: tuple[str, ...] = get_args(Action)

# the longest each string may be (characters): a writer cuts to it, a reader refuses beyond it
_SHORT = 64
_NAME = 200
_PATH = 500
_SENTENCE = 1000
_MAX_COUNT = 10**12
_MAX_SECONDS = 10.0**9
_MAX_USD = 10.0**9


class ProvenanceError(ValueError):
    """A record that is not one nbagent writes; ``key`` names where (``"calls[3].tool"``)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(
            f"nbagent metadata: {key}: {problem}" if key else f"nbagent metadata: {problem}"
        )
        self.key = key
        self.problem = problem


def sha256_digest(data: bytes | str) -> str:
    """``sha256:`` and the hex digest of ``data`` (text as UTF-8), as every digest is written."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class CallRecord:
    """One tool call of a run: its tool, how it was decided, and how it ended.

    A call an external agent made (``%agent serve``, mode ``served``) also keeps what it asked
    (``arguments``, as JSON) and what it got (``result``), each cut to 300 characters and
    redacted: both are None, or both are text."""

    tool: str
    decision: Decision
    status: str
    arguments: str | None = None
    result: str | None = None


@dataclass(frozen=True)
class SnippetRecord:
    """Code the agent ran in the kernel (its first 2000 characters) and what became of it."""

    code: str
    kept: Kept = "kept"


@dataclass(frozen=True)
class Provenance:
    """What one ``%agent`` run was: the contract between the notebook and the class report.

    ``model`` and ``provider`` are None only when no model was chosen (AI off, or a policy
    refusal before any model was resolved); ``refused`` is the refusal's one sentence.
    ``cost_usd`` is None when the price is unknown (never a guess). ``calls_total`` and
    ``snippets_total`` count what the run had, when the lists keep only the first 200.
    """

    run_id: str
    prompt: str
    model: str | None
    provider: str | None
    mode: Mode
    recording: str | None = None
    recording_digest: str | None = None
    policy_digest: str | None = None
    policy_source: str | None = None
    ai_off: bool = False
    refused: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0
    stop_reason: str = "finished"
    calls: tuple[CallRecord, ...] = field(default_factory=tuple)
    calls_total: int | None = None
    snippets: tuple[SnippetRecord, ...] = field(default_factory=tuple)
    snippets_total: int | None = None
    output_digest: str | None = None
    #: The policy rule a refusal names (``ai``, ``models``, ``budget.session.tokens`` …).
    rule: str | None = None
    #: When the run started (or was refused), UTC, to the second: ``2026-03-02T14:05:09Z``.
    at: str | None = None
    #: A map's record (``%agent map``): how many runs it stands for (its rows that asked a
    #: model); None for one run's record.
    rows: int | None = None
    #: What the run's outputs showed, by form (``text/plain``, ``text/html``,
    #: ``text/markdown``, and ``text``: the run record's own): ``sha256:`` digests, added when
    #: the outputs are written (:mod:`nbagent.course.shown`); None in older records.
    shown: Mapping[str, str] | None = None

    def to_metadata(self) -> dict[str, Any]:
        """The JSON object written under ``metadata["nbagent"]``: every string cut to its bound,
        the prompt and code redacted, the lists capped at 200 with their counts kept."""
        calls = list(self.calls)
        snippets = list(self.snippets)
        data: dict[str, Any] = {
            "version": VERSION,
            "run_id": _cut(self.run_id, _SHORT),
            "prompt": _cut(redact_secrets(self.prompt), MAX_PROMPT),
            "model": _cut_or_none(self.model and redact_secrets(self.model), _NAME),
            "provider": _cut_or_none(self.provider, _SHORT),
            "mode": self.mode,
            "recording": _cut_or_none(self.recording, _PATH),
            "recording_digest": self.recording_digest,
            "policy_digest": self.policy_digest,
            "policy_source": _cut_or_none(self.policy_source, _PATH),
            "ai_off": self.ai_off,
            "refused": _cut_or_none(self.refused and redact_secrets(self.refused), _SENTENCE),
            "tokens": {"input": self.input_tokens, "output": self.output_tokens},
            "requests": self.requests,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 8),
            "seconds": round(self.seconds, 3),
            "stop_reason": _cut(self.stop_reason, _SHORT),
            "calls": [_call_metadata(c) for c in calls[:MAX_ITEMS]],
            "calls_total": max(len(calls), self.calls_total or 0),
            "snippets": [
                {"code": _cut(redact_secrets(s.code), MAX_CODE), "kept": s.kept}
                for s in snippets[:MAX_ITEMS]
            ],
            "snippets_total": max(len(snippets), self.snippets_total or 0),
            "output_digest": self.output_digest,
            "rule": _cut_or_none(self.rule, _SHORT),
            "at": self.at,
        }
        if self.rows is not None:  # only a map's record has it
            data["rows"] = self.rows
        if self.shown is not None:
            data["shown"] = dict(self.shown)
        from_metadata(data)  # what we write, we can read back: a bad value fails here, not later
        return data


@dataclass(frozen=True)
class StepRecord:
    """One step of a run's code in the cell ``%agent cells`` made: its run and step, and
    whether its code is in the cell (``kept``) or only there as a comment (``left_out`` says
    why: ``undone``, ``error``, ``interrupted`` …)."""

    run_id: str | None
    step: int | None
    kept: bool = True
    left_out: str | None = None


@dataclass(frozen=True)
class FollowUp:
    """What a later command did with runs' code: ``cells`` (``%agent cells`` put it into a new
    cell) or ``undone`` (``%agent undo``). ``code_digest`` is the digest of the new cell's
    source (None for ``undone``), so a report can find the cell it became.

    The same record of a ``cells`` command is written twice: into the command's output, and
    (by the notebook's page) into the new cell's own metadata, where it says the agent made
    that cell: which steps of which runs it holds and whether each step's code is kept in it,
    under which policy (``policy_digest``)."""

    action: Action
    runs: tuple[str, ...]
    code_digest: str | None = None
    steps: tuple[StepRecord, ...] = ()
    policy_digest: str | None = None

    def to_metadata(self) -> dict[str, Any]:
        """The JSON object written under ``metadata["nbagent"]`` of the command's output."""
        data = {
            "version": VERSION,
            "action": self.action,
            "runs": [_cut(r, _SHORT) for r in self.runs[:MAX_ITEMS]],
            "code_digest": self.code_digest,
            "steps": [
                {
                    "run_id": _cut_or_none(s.run_id, _SHORT),
                    "step": s.step,
                    "kept": s.kept,
                    "left_out": _cut_or_none(s.left_out, _SHORT),
                }
                for s in self.steps[:MAX_ITEMS]
            ],
            "policy_digest": self.policy_digest,
        }
        follow_up_from_metadata(data)
        return data


# --- the strict readers --------------------------------------------------------------------


def read_output(metadata: object) -> Provenance | FollowUp | None:
    """The record an output's ``metadata`` carries, wherever nbagent puts it: a run's output
    holds its run record under ``"nbagent"`` with the provenance under ``"provenance"`` in it;
    a follow-up (``%agent cells``, ``%agent undo``) and a refused cell hold theirs under
    ``"nbagent"`` itself. None when the output has no nbagent record (or only the mark that
    it is part of a run: :mod:`nbagent.course.shown`); ProvenanceError when it has one that
    is not valid."""
    if not isinstance(metadata, Mapping) or KEY not in metadata:
        return None
    value = metadata[KEY]
    if isinstance(value, Mapping) and set(value) == {"part_of"}:
        return None  # an output of a run that another output carries the record of
    if isinstance(value, Mapping) and "provenance" in value:
        value = value["provenance"]
    if is_follow_up(value):
        return follow_up_from_metadata(value)
    return from_metadata(value)


def is_follow_up(value: object) -> bool:
    """Whether an ``"nbagent"`` metadata value is shaped as a :class:`FollowUp` (it has
    ``"action"``), so a reader knows which of the two readers to use."""
    return isinstance(value, Mapping) and "action" in value


def from_metadata(value: object) -> Provenance:
    """Read a run's record from untrusted metadata (the value under ``"nbagent"``).

    Raises :class:`ProvenanceError` for anything nbagent would not have written."""
    obj = _object(value, "", _RUN_KEYS, _RUN_LATER)
    if obj["version"] != VERSION or isinstance(obj["version"], bool):
        raise ProvenanceError(
            "version", f"unknown version {_shown(obj['version'])} (this reader knows 1)"
        )
    tokens = _object(obj["tokens"], "tokens", {"input", "output"})
    calls = _list(obj["calls"], "calls")
    snippets = _list(obj["snippets"], "snippets")
    call_records = []
    for n, item in enumerate(calls):
        where = f"calls[{n}]"
        asked = isinstance(item, Mapping) and ("arguments" in item or "result" in item)
        call = _object(item, where, _SERVED_CALL_KEYS if asked else _CALL_KEYS)
        call_records.append(
            CallRecord(
                tool=_text(call["tool"], f"{where}.tool", _NAME),
                decision=_choice(call["decision"], f"{where}.decision", _DECISIONS),  # type: ignore[arg-type]
                status=_text(call["status"], f"{where}.status", _SHORT),
                arguments=_text(call["arguments"], f"{where}.arguments", MAX_ASKED)
                if asked
                else None,
                result=_text(call["result"], f"{where}.result", MAX_ASKED) if asked else None,
            )
        )
    snippet_records = []
    for n, item in enumerate(snippets):
        where = f"snippets[{n}]"
        snippet = _object(item, where, {"code", "kept"})
        snippet_records.append(
            SnippetRecord(
                code=_text(snippet["code"], f"{where}.code", MAX_CODE),
                kept=_choice(snippet["kept"], f"{where}.kept", _KEPT),  # type: ignore[arg-type]
            )
        )
    calls_total = _count(obj["calls_total"], "calls_total")
    snippets_total = _count(obj["snippets_total"], "snippets_total")
    if calls_total < len(call_records):
        raise ProvenanceError("calls_total", "is less than the calls listed")
    if snippets_total < len(snippet_records):
        raise ProvenanceError("snippets_total", "is less than the snippets listed")
    cost = obj["cost_usd"]
    return Provenance(
        run_id=_text(obj["run_id"], "run_id", _SHORT),
        prompt=_text(obj["prompt"], "prompt", MAX_PROMPT),
        model=_text_or_none(obj["model"], "model", _NAME),
        provider=_text_or_none(obj["provider"], "provider", _SHORT),
        mode=_choice(obj["mode"], "mode", _MODES),  # type: ignore[arg-type]
        recording=_text_or_none(obj["recording"], "recording", _PATH),
        recording_digest=_digest(obj["recording_digest"], "recording_digest"),
        policy_digest=_digest(obj["policy_digest"], "policy_digest"),
        policy_source=_text_or_none(obj["policy_source"], "policy_source", _PATH),
        ai_off=_flag(obj["ai_off"], "ai_off"),
        refused=_text_or_none(obj["refused"], "refused", _SENTENCE),
        input_tokens=_count(tokens["input"], "tokens.input"),
        output_tokens=_count(tokens["output"], "tokens.output"),
        requests=_count(obj["requests"], "requests"),
        cost_usd=None if cost is None else _number(cost, "cost_usd", _MAX_USD),
        seconds=_number(obj["seconds"], "seconds", _MAX_SECONDS),
        stop_reason=_text(obj["stop_reason"], "stop_reason", _SHORT),
        calls=tuple(call_records),
        calls_total=calls_total,
        snippets=tuple(snippet_records),
        snippets_total=snippets_total,
        output_digest=_digest(obj["output_digest"], "output_digest"),
        rule=_text_or_none(obj.get("rule"), "rule", _SHORT),
        at=_time(obj.get("at"), "at"),
        rows=None if obj.get("rows") is None else _count(obj["rows"], "rows"),
        shown=_shown_digests(obj.get("shown")),
    )


def follow_up_from_metadata(value: object) -> FollowUp:
    """Read a :class:`FollowUp` from untrusted metadata (:class:`ProvenanceError` if it is not)."""
    obj = _object(value, "", _FOLLOW_UP_KEYS, _FOLLOW_UP_LATER)
    if obj["version"] != VERSION or isinstance(obj["version"], bool):
        raise ProvenanceError(
            "version", f"unknown version {_shown(obj['version'])} (this reader knows 1)"
        )
    runs = _list(obj["runs"], "runs")
    steps = []
    for n, item in enumerate(_list(obj.get("steps", []), "steps")):
        where = f"steps[{n}]"
        step = _object(item, where, _STEP_KEYS)
        number = step["step"]
        steps.append(
            StepRecord(
                run_id=_text_or_none(step["run_id"], f"{where}.run_id", _SHORT),
                step=None if number is None else _count(number, f"{where}.step"),
                kept=_flag(step["kept"], f"{where}.kept"),
                left_out=_text_or_none(step["left_out"], f"{where}.left_out", _SHORT),
            )
        )
    return FollowUp(
        action=_choice(obj["action"], "action", _ACTIONS),  # type: ignore[arg-type]
        runs=tuple(_text(r, f"runs[{n}]", _SHORT) for n, r in enumerate(runs)),
        code_digest=_digest(obj["code_digest"], "code_digest"),
        steps=tuple(steps),
        policy_digest=_digest(obj.get("policy_digest"), "policy_digest"),
    )


_RUN_KEYS = frozenset(
    {
        "version", "run_id", "prompt", "model", "provider", "mode", "recording",
        "recording_digest", "policy_digest", "policy_source", "ai_off", "refused", "tokens",
        "requests", "cost_usd", "seconds", "stop_reason", "calls", "calls_total", "snippets",
        "snippets_total", "output_digest",
    }
)  # fmt: skip
#: Keys added since the first records: a record written before them is still read.
_RUN_LATER = frozenset({"rule", "at", "rows", "shown"})
#: The forms ``shown`` digests (see :mod:`nbagent.course.shown`).
_SHOWN_KEYS = frozenset({"text/plain", "text/html", "text/markdown", "text"})
_FOLLOW_UP_KEYS = frozenset({"version", "action", "runs", "code_digest"})
_FOLLOW_UP_LATER = frozenset({"steps", "policy_digest"})
_STEP_KEYS = frozenset({"run_id", "step", "kept", "left_out"})


_CALL_KEYS = frozenset({"tool", "decision", "status"})
_SERVED_CALL_KEYS = _CALL_KEYS | {"arguments", "result"}


def _call_metadata(call: CallRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tool": _cut(call.tool, _NAME),
        "decision": call.decision,
        "status": _cut(call.status, _SHORT),
    }
    if call.arguments is not None or call.result is not None:
        data["arguments"] = _cut(redact_secrets(call.arguments or ""), MAX_ASKED)
        data["result"] = _cut(redact_secrets(call.result or ""), MAX_ASKED)
    return data


def _shown(value: object) -> str:
    text = (
        repr(value)
        if isinstance(value, (str, int, float, bool)) or value is None
        else type(value).__name__
    )
    return text if len(text) <= 40 else text[:37] + "..."


def _object(
    value: object,
    where: str,
    keys: frozenset[str] | set[str],
    later: frozenset[str] = frozenset(),
) -> Mapping[str, Any]:
    """``value`` as an object with every one of ``keys`` and no key but those and ``later``
    (keys a newer nbagent writes, missing from older records)."""
    if not isinstance(value, Mapping):
        raise ProvenanceError(where, f"must be an object, not {_shown(value)}")
    if len(value) > len(keys) + len(later) or any(k not in keys and k not in later for k in value):
        extra = list(itertools.islice((k for k in value if k not in keys and k not in later), 3))
        shown = ", ".join(_shown(k) if not isinstance(k, str) else repr(k[:40]) for k in extra)
        raise ProvenanceError(where, f"unknown key(s) {shown}")
    missing = sorted(keys - set(value))
    if missing:
        raise ProvenanceError(where, f"missing key(s) {', '.join(map(repr, missing))}")
    return value


def _list(value: object, where: str) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        raise ProvenanceError(where, f"must be a list, not {_shown(value)}")
    if len(value) > MAX_ITEMS:
        raise ProvenanceError(where, f"holds {len(value)} items; at most {MAX_ITEMS} are written")
    return value


def _text(value: object, where: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ProvenanceError(where, f"must be a string, not {_shown(value)}")
    if len(value) > limit:
        raise ProvenanceError(where, f"is {len(value)} characters; at most {limit} are written")
    return value


def _text_or_none(value: object, where: str, limit: int) -> str | None:
    return None if value is None else _text(value, where, limit)


def _choice(value: object, where: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ProvenanceError(where, f"must be one of {', '.join(choices)}, not {_shown(value)}")
    return value


def _flag(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ProvenanceError(where, f"must be true or false, not {_shown(value)}")
    return value


def _count(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_COUNT:
        raise ProvenanceError(where, f"must be a whole number from 0 to 10^12, not {_shown(value)}")
    return value


def _number(value: object, where: str, limit: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProvenanceError(where, f"must be a number, not {_shown(value)}")
    number = float(value)
    if not math.isfinite(number) or not 0 <= number <= limit:
        raise ProvenanceError(
            where, f"must be a finite number from 0 to {limit:g}, not {_shown(value)}"
        )
    return number


def _digest(value: object, where: str) -> str | None:
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or len(value) != 71
        or not value.startswith("sha256:")
        or any(c not in "0123456789abcdef" for c in value[7:])
    ):
        raise ProvenanceError(
            where, f"must be 'sha256:' and 64 lower-case hex digits, not {_shown(value)}"
        )
    return value


def _shown_digests(value: object) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or len(value) > len(_SHOWN_KEYS):
        raise ProvenanceError("shown", f"must be an object of digests, not {_shown(value)}")
    out = {}
    for key, digest in value.items():
        if key not in _SHOWN_KEYS:
            raise ProvenanceError("shown", f"unknown key(s) {_shown(key)}")
        found = _digest(digest, f"shown.{key}")
        if found is None:
            raise ProvenanceError(f"shown.{key}", "must be a digest, not null")
        out[key] = found
    return out


_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _time(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _TIME.fullmatch(value):
        raise ProvenanceError(
            where, f"must be a UTC time such as '2026-03-02T14:05:09Z', not {_shown(value)}"
        )
    return value


def utc_now(seconds_ago: float = 0.0) -> str:
    """The time now (or ``seconds_ago``), UTC to the second, as records write it."""
    moment = time.time() - max(0.0, seconds_ago)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cut_or_none(text: str | None, limit: int) -> str | None:
    return None if text is None else _cut(text, limit)
