"""Generated sample submissions: notebooks (and their recordings) shaped as nbagent saves them.

For the teachers' lesson, the class-report benchmark and the tests: :func:`write_samples`
writes ``<folder>/<student>/<notebook>.ipynb`` for a number of made-up students, with the
provenance each ``%agent`` output carries and the recordings beside them, and a few students
whose submissions a teacher should look at (each kind of flag once). Every notebook says in its
first cell that it was generated. Nothing here talks to a model: the runs never happened.

They also work when a teacher opens one: each notebook loads nbagent first; an exam is AI off
by the course policy (``exams/*.ipynb`` names every student's exams folder) and carries the
very refusal the notebook shows (:mod:`.refusal`), so running it refuses the same way and asks
for no key; and each homework run's recording is filed under the run's real first request,
so Run All with no key replays every answer.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._digest import digest as _hash
from ..content import TextPart
from ..generation import Options, Request
from ..messages import AssistantMessage, Message, UserMessage
from ..recording import Recording, Step, fingerprint
from .policy import FILENAME, CoursePolicy, parse_policy
from .provenance import CallRecord, Provenance, SnippetRecord, sha256_digest
from .refusal import ai_off_sentence, refusal_bundle, rule_said

__all__ = ["FLAGGED", "Sample", "write_samples"]

_PROMPTS = (
    "Which months in sales are unusual for the season?",
    "Explain the difference between a list and a tuple",
    "What is the weather in Paris?",
    "Plot the monthly totals of sales",
    "Why does my loop print the same value three times?",
    "Summarise the data set in three sentences",
)
_ANSWERS = (
    "March and October are unusual: both are more than two standard deviations above the mean.",
    "A list can change after it is made; a tuple cannot, so a tuple can be a dict key.",
    "Paris: sunny, 21 °C",
    "I plotted the monthly totals: the peak is in December.",
    "The loop variable is read when the function runs, not when it is defined.",
    "The data holds 120 months of sales for three shops; sales grow 4% a year.",
)
_MODELS = ("openai:gpt-4.1-mini", "anthropic:claude-haiku-4-5", "openai:gpt-4.1-nano")

#: The students whose samples carry a problem, and the flag each one shows.
FLAGGED: dict[str, str] = {
    "student-exam-run": "ai_off",
    "student-own-policy": "other_policy",
    "student-edited-answer": "output_mismatch",
    "student-removed-record": "metadata_removed",
    "student-tampered": "metadata_tampered",
    "student-broken-file": "unreadable",
}


@dataclass(frozen=True)
class Sample:
    """What :func:`write_samples` wrote for one notebook: where, and the flag expected."""

    student: str
    path: Path
    flag: str | None


def _cell(source: str, **extra: Any) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "id": extra.pop("id"),
            "metadata": {}, "outputs": [], "source": source, **extra}  # fmt: skip


def _markdown(source: str, cell_id: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": source}


def _notebook(cells: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


_LOAD = "%load_ext nbagent"


def _recording(history: list[Message], prompt: str, answer: str, model: str) -> Recording:
    """The recording of one run: its first request as a notebook sends it after ``history``
    (no tools, no instructions, the default options), so a replay of the cell finds it."""
    finish = {"type": "finish", "reason": "stop", "raw_reason": "stop", "t": 400,
              "usage": {"input_tokens": 240, "output_tokens": 40,
                        "cache_read_tokens": 0, "cache_write_tokens": 0}}  # fmt: skip
    asked = Request((*history, UserMessage((TextPart(prompt),))), "", (), None, Options())
    events = [{"type": "text", "text": answer, "d": 100, "t": 300}, finish]
    return Recording([Step(fingerprint(asked), events)], model=model,
                     created="2026-11-30T09:00:00+00:00", prompt=prompt)  # fmt: skip


def _prefix(student: str) -> str:
    """A kernel session's id prefix (random in a kernel; fixed here, by the student)."""
    letters = "abcdefghjkmnpqrstuvwxyz"
    raw = int(sha256_digest(student)[7:23], 16)
    return "".join(letters[(raw >> (5 * n)) % len(letters)] for n in range(5))


def _source(policy_path: Path | None, folder: Path) -> str | None:
    """The policy's path as a record keeps it: relative to the notebook's folder."""
    if policy_path is None:
        return None
    return os.path.relpath(policy_path, folder).replace(os.sep, "/")


def _run_output(run: Provenance, answer: str, cell_id: str) -> dict[str, Any]:
    footer = f"finished · 1 step · {run.input_tokens:,} in / {run.output_tokens:,} out tokens"
    return {
        "output_type": "display_data",
        "data": {
            "text/markdown": f"**{run.run_id}** · {run.model}\n\n{answer}\n\n*{footer}*",
            "text/plain": f"{run.run_id} · {run.model}\n{answer}\n{footer}",
        },
        # as the notebook writes it: the run view's own record, the provenance inside it
        "metadata": {"nbagent": {"version": 1, "run_id": run.run_id, "prompt": run.prompt,
                                 "model": run.model, "stop_reason": run.stop_reason,
                                 "usage": {"input_tokens": run.input_tokens,
                                           "output_tokens": run.output_tokens},
                                 "provenance": run.to_metadata()}},
    }  # fmt: skip


def _student_notebook(
    folder: Path, student: str, index: int, rng: random.Random, policy_digest: str | None,
    flag: str | None, policy_path: Path | None,
) -> Path:  # fmt: skip
    notebook_dir = folder / student
    recordings = notebook_dir / "nbagent-recordings"
    recordings.mkdir(parents=True, exist_ok=True)
    cells = [_markdown(f"# Homework 1 ({student})\n\n*Generated sample submission: made by "
                       "`scripts/make_sample_submissions.py`, not a real student's work.*",
                       "intro"), _cell(_LOAD, id="load")]  # fmt: skip
    source = _source(policy_path, notebook_dir) if policy_digest else None
    history: list[Message] = []
    runs = 2 + index % 3
    for number in range(1, runs + 1):
        which = (index + number) % len(_PROMPTS)
        prompt, answer = _PROMPTS[which], _ANSWERS[which]
        live = (index + number) % 2 == 0
        model = _MODELS[(index + number) % len(_MODELS)]
        made = _recording(history, prompt, answer, model)
        name = f"run-{number}-{_hash(made.steps[0].request)}.json"  # found as a notebook files it
        recording = made.to_json()
        (recordings / name).write_text(recording, encoding="utf-8")
        history += [UserMessage((TextPart(prompt),)), AssistantMessage((TextPart(answer),))]
        tokens_in, tokens_out = 200 + rng.randrange(400), 20 + rng.randrange(200)
        kernel = which == 3
        run = Provenance(
            run_id=f"run-{_prefix(student)}-{number}",
            prompt=prompt,
            model=model,
            provider=model.split(":", 1)[0],
            mode="live" if live else "replayed",
            recording=f"nbagent-recordings/{name}",
            recording_digest=sha256_digest(recording),
            policy_digest=policy_digest,
            policy_source=source or ("nbagent-course.toml" if policy_digest else None),
            input_tokens=tokens_in,
            output_tokens=tokens_out,
            requests=1 + int(kernel),
            cost_usd=round((tokens_in * 0.4 + tokens_out * 1.6) / 1e6, 6) if live else 0.0,
            seconds=round(0.5 + rng.random() * 3, 3),
            calls=(CallRecord("run_python", "approved", "done"),) if kernel else (),
            snippets=(SnippetRecord("monthly = sales.resample('ME').sum()\nmonthly.plot()"),)
            if kernel
            else (),
            output_digest=sha256_digest(answer),
        )
        cell = _cell(f"%agent {prompt}", id=f"run{number}")
        output = _run_output(run, answer, cell["id"])
        if flag == "output_mismatch" and number == 1:  # the answer edited in the notebook file
            edited = "March and October, as the agent found (it checked every month)."
            output = _run_output(
                Provenance(**{**run.__dict__, "output_digest": sha256_digest(edited)}),
                edited,
                cell["id"],
            )
        if flag == "metadata_removed" and number == 1:
            output["metadata"] = {}
        if flag == "metadata_tampered" and number == 1:
            output["metadata"]["nbagent"]["provenance"]["tokens"]["input"] = -5000
        cell["outputs"] = [output]
        cells.append(cell)
    path = notebook_dir / "homework-1.ipynb"
    path.write_text(json.dumps(_notebook(cells), indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def _exam(
    folder: Path, student: str, policy_digest: str | None, ran: bool, course: CoursePolicy | None,
    policy_path: Path | None,
) -> Path:  # fmt: skip
    exam = folder / student / "exams"
    exam.mkdir(parents=True, exist_ok=True)
    prompt = "Solve question 2 for me"
    intro = _markdown(
        "# Exam\n\n*Generated sample submission, not a real student's work.*", "intro"
    )
    cells = [intro, _cell(_LOAD, id="load"), _cell(f"%agent {prompt}", id="ask")]
    source = _source(policy_path, exam) or "nbagent-course.toml"
    if ran:  # the notebook was renamed while it ran, so no AI-off rule matched it
        answer = "Question 2: the answer is 42."
        run = Provenance(run_id=f"run-{_prefix(student)}-1", prompt=prompt, model=_MODELS[0],
                         provider="openai", mode="live", policy_digest=policy_digest,
                         policy_source=source, input_tokens=150, output_tokens=12, requests=1,
                         cost_usd=0.00008, seconds=0.8,
                         output_digest=sha256_digest(answer))  # fmt: skip
        cells[2]["outputs"] = [_run_output(run, answer, "ask")]
    else:
        # the refusal the notebook shows, word for word: the course's own rule and message
        rules = course.for_notebook("exams/final.ipynb") if course is not None else None
        said = rules.said("ai") if rules is not None else "notebooks[1].ai = false"
        message = rules.message if rules is not None else "This is an exam: AI is off."
        sentence = ai_off_sentence(message, rule_said(said, source))
        # as JupyterLab saves a refused cell: the record in its output and in the cell itself
        refusal_id = "refused-" + sha256_digest(student)[7:19]  # random in a kernel; fixed here
        run = Provenance(run_id=refusal_id, prompt=prompt, model=None, provider=None,
                         mode="offline", policy_digest=policy_digest,
                         policy_source=source, ai_off=True, refused=sentence,
                         stop_reason="refused", rule="ai",
                         at="2026-11-30T10:00:00Z")  # fmt: skip
        cells[2]["outputs"] = [{"output_type": "display_data", "data": refusal_bundle(sentence),
                                "metadata": {"nbagent": run.to_metadata()}}]  # fmt: skip
        cells[2]["metadata"] = {"nbagent": run.to_metadata()}
    path = exam / "final.ipynb"
    path.write_text(json.dumps(_notebook(cells), indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def write_samples(
    folder: str | Path, count: int = 8, *, policy: bytes | None = None, seed: int = 28,
    policy_path: str | Path | None = None,
) -> list[Sample]:  # fmt: skip
    """Write ``count`` students' submissions under ``folder`` (at least the flagged ones of
    :data:`FLAGGED`, then ordinary ones), runs made under the policy whose file's bytes are
    ``policy`` (None: no policy in force), a file at ``policy_path`` (by default beside
    ``folder``, as a course lays it out: ``course/nbagent-course.toml``,
    ``course/submissions/``). Returns what was written."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    digest = sha256_digest(policy) if policy is not None else None
    where = Path(policy_path) if policy_path is not None else root.parent / FILENAME
    course = parse_policy(policy, where) if policy is not None else None
    path_of = where if policy is not None else None
    written: list[Sample] = []
    names = list(FLAGGED)
    names += [f"student-{n:03d}" for n in range(1, max(0, count - len(names)) + 1)]
    for index, student in enumerate(names):
        flag = FLAGGED.get(student)
        if flag == "unreadable":
            target = root / student / "homework-1.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text('{"cells": [{"cell_type": "code", "source": "%agent hi"', "utf-8")
            written.append(Sample(student, target, flag))
            continue
        run_flag = (
            flag if flag in ("output_mismatch", "metadata_removed", "metadata_tampered") else None
        )
        own = sha256_digest(b"# my own policy\n") if flag == "other_policy" else digest
        path = _student_notebook(root, student, index, rng, own, run_flag, path_of)
        written.append(Sample(student, path, flag if flag != "ai_off" else None))
        exam = _exam(root, student, digest, flag == "ai_off", course, path_of)
        written.append(Sample(student, exam, "ai_off" if flag == "ai_off" else None))
    return written
