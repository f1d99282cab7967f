"""Agent.map's inputs: what a template may hold (checked before any run), and rows that cannot
become a prompt, or cannot be kept, which are failed rows while every other row goes on.

The model is a FunctionModel that counts what it is asked (a real Generator through the real
loop); checkpoints are real files in the test's folder.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nbagent import Agent
from nbagent.batch import Batch, load_checkpoint
from nbagent.errors import BatchInputError
from nbagent.generation import Finish, ProviderToolResultReceived, Request, TextDelta
from nbagent.messages import ProviderToolResult
from nbagent.models import FunctionModel


class Counting:
    """Answers "echo PROMPT" and keeps every prompt it was sent."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def agent(self) -> Agent:
        def decide(request: Request) -> Any:
            prompt = request.messages[0].text  # type: ignore[union-attr]
            self.prompts.append(prompt)
            return f"echo {prompt}"

        return Agent(FunctionModel(decide))


def answers() -> pd.DataFrame:
    return pd.DataFrame({"answer": ["Paris", "Rome"], "score": [1.5, 2.25]}, index=["a", "b"])


# --- templates: refused before any run, naming the field --------------------------------------


@pytest.mark.parametrize(
    ("template", "field"),
    [
        ("Grade {answer:>1000000000}", "{answer:>1000000000}"),  # the issue's: gigabytes a row
        ("Grade {answer:x^5000000}", "{answer:x^5000000}"),  # any fill and alignment
        ("Grade {answer:05000000}", "{answer:05000000}"),  # zero padding
        ("Score {score:.5000000f}", "{score:.5000000f}"),  # precision: digits of a float
        ("Score {score:,.3000f}", "{score:,.3000f}"),
        ("Score {score!s:>3000}", "{score!s:>3000}"),  # after a conversion
        ("{answer:>600} and {score:>600}", "{answer:>600} asks for 600 characters (1,200"),
        ("On {answer:%d.%m.%Y 99999999}", "{answer:%d.%m.%Y 99999999}"),  # a type's own spec
        ("Grade {answer:>" + "9" * 5000 + "}", "{answer:>999"),  # more digits than int() takes
    ],
)
def test_a_format_spec_that_would_blow_up_a_prompt_is_refused_before_any_run(
    template: str, field: str
) -> None:
    model = Counting()
    with pytest.raises(BatchInputError) as caught:
        model.agent().map_sync(answers(), template, progress=None)
    message = str(caught.value)
    assert f"the template field {field}" in message
    assert "at most 1,000" in message
    assert model.prompts == []


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("Grade {answer:{width}}", "a field inside its format spec"),  # nested fields
        ("Grade {answer:>{width}.{precision}}", "a field inside its format spec"),
        ("Grade {answer!x}", "the conversion !x"),
        ("Grade {answer} \ud800", "lone surrogate"),
        ("Grade {answer!r", "malformed"),
    ],
)
def test_what_a_template_does_not_support_is_refused_before_any_run(
    template: str, why: str
) -> None:
    model = Counting()
    with pytest.raises(BatchInputError, match=why):
        Batch(model.agent(), answers(), template)
    assert model.prompts == []


async def test_ordinary_format_specs_and_conversions_fill_the_prompts() -> None:
    model = Counting()
    frame = answers().assign(day=[datetime.date(2026, 3, 1), datetime.date(2026, 3, 2)])
    out = await model.agent().map(
        frame, "{answer:<8}|{score:>6.2f}|{answer!r}|{day:%d.%m.%Y}|{score:.0%}", progress=None
    )
    assert list(out["prompt"]) == [
        "Paris   |  1.50|'Paris'|01.03.2026|150%",
        "Rome    |  2.25|'Rome'|02.03.2026|225%",
    ]
    assert (out["status"] == "done").all()


# --- rows that cannot become a prompt: that row's failure, the others run ---------------------


class FormatRaises:
    def __format__(self, spec: str) -> str:
        raise RuntimeError("this value will not be formatted")


class ReprRaises:
    def __repr__(self) -> str:
        raise LookupError("no repr for this one")


class StrRaisesWithAnUnprintableError:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise ValueError("and neither will its error")

    def __str__(self) -> str:
        raise self.Unprintable()


class MemoryHungry:
    def __format__(self, spec: str) -> str:
        raise MemoryError


async def test_a_value_that_will_not_format_is_that_rows_failure_and_the_others_run() -> None:
    model = Counting()
    frame = pd.DataFrame(
        {
            "answer": [
                "fine",
                FormatRaises(),
                ReprRaises(),
                StrRaisesWithAnUnprintableError(),
                MemoryHungry(),
                "b\ud800d",  # a lone surrogate: no UTF-8 request can carry it
                "also fine",
            ]
        }
    )
    out = await model.agent().map(frame, "Grade {answer} ({answer!r})", progress=None)
    assert list(out["status"]) == ["done"] + ["failed"] * 5 + ["done"]
    errors = list(out["error"])
    assert "RuntimeError: this value will not be formatted" in errors[1]
    assert "LookupError: no repr for this one" in errors[2]
    assert "does not format as {answer}: Unprintable" in errors[3]
    assert "MemoryError" in errors[4]
    assert "lone surrogate (U+D800)" in errors[5] and "column 'answer'" in errors[5]
    assert model.prompts == ["Grade fine ('fine')", "Grade also fine ('also fine')"]


async def test_a_decimal_that_a_fixed_point_spec_would_write_out_in_full_is_a_failed_row() -> None:
    """``{price:.2f}`` is an ordinary spec, but a Decimal in fixed point writes every digit of
    its integer part: ``Decimal("1E+999999999")`` (a few bytes) would be a gigabyte of text.
    Such a row fails before anything is allocated; ordinary values format as usual."""
    model = Counting()
    frame = pd.DataFrame({"price": [Decimal("3.14159"), Decimal("1E+999999999"), Decimal("-2")]})
    out = await model.agent().map(frame, "{price:.2f} | {price:.1%}", progress=None)
    assert list(out["status"]) == ["done", "failed", "done"]
    assert "column 'price' would be 1,000,000,004 characters as {price:.2f}" in out["error"][1]
    assert model.prompts == ["3.14 | 314.2%", "-2.00 | -200.0%"]


async def test_a_prompt_holding_a_lone_surrogate_is_a_failed_row_and_the_checkpoint_keeps_the_rest(
    tmp_path: Path,
) -> None:
    """The issue's case: one row with a lone surrogate lost the whole table, because writing
    it to the checkpoint raised UnicodeEncodeError. It is a failed row (never sent: no UTF-8
    request can carry it), and every other row is done and checkpointed."""
    path = tmp_path / "grades.jsonl"
    model = Counting()
    prompts = ["a", "b\ud800", "c", "d"]
    out = await model.agent().map(prompts, checkpoint=path, progress=None)
    assert list(out["status"]) == ["done", "failed", "done", "done"]
    assert "lone surrogate (U+D800) at character 1" in out["error"][1]
    assert model.prompts == ["a", "c", "d"]
    rows = load_checkpoint(path).rows.values()
    assert sorted((r.prompt, r.status) for r in rows) == [
        ("a", "done"),
        ("b\ud800", "failed"),  # written escaped, read back as it was
        ("c", "done"),
        ("d", "done"),
    ]
    again = Counting()
    await again.agent().map(prompts, checkpoint=path, progress=None)
    assert again.prompts == []  # the done rows were kept; the bad one fails again, unsent


async def test_an_index_label_with_a_lone_surrogate_is_kept_and_resumed(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    frame = pd.DataFrame({"q": ["one", "two"]}, index=["x\udcff", "y"])
    out = await Counting().agent().map(frame, "ask {q}", checkpoint=path, progress=None)
    assert (out["status"] == "done").all()
    again = Counting()
    resumed = await again.agent().map(frame, "ask {q}", checkpoint=path, progress=None)
    assert again.prompts == []
    assert list(resumed.index) == ["x\udcff", "y"] and (resumed["status"] == "done").all()


class UnreadableLabel:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        return self is other


async def test_an_index_label_that_cannot_be_read_is_that_rows_failure() -> None:
    model = Counting()
    frame = pd.DataFrame({"q": ["one", "two"]}, index=pd.Index([UnreadableLabel(), "y"]))
    out = await model.agent().map(frame, "ask {q}", progress=None)
    assert list(out["status"]) == ["failed", "done"]
    assert "index label cannot be read: RuntimeError: no repr" in out["error"].iloc[0]
    assert model.prompts == ["ask two"]


# --- rows that cannot be kept: that row's failure, the others are kept -------------------------


def provider_result_model() -> FunctionModel:
    """Answers every prompt; for "b" it also streams a provider tool result holding a value
    JSON cannot carry (a datetime), as an offline model written by a person may."""

    async def decide(request: Request) -> AsyncIterator[Any]:
        prompt = request.messages[0].text  # type: ignore[union-attr]
        if prompt == "b":
            when = {"fetched": datetime.datetime(2026, 1, 1)}
            yield ProviderToolResultReceived(ProviderToolResult("srv_1", "web_search", when))
        yield TextDelta(f"answer {prompt}")
        yield Finish("stop")

    return FunctionModel(decide)


async def test_a_row_the_checkpoint_cannot_hold_is_a_failed_row_and_the_others_are_kept(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rows.jsonl"
    out = await Agent(provider_result_model()).map(["a", "b", "c"], checkpoint=path, progress=None)
    assert list(out["status"]) == ["done", "failed", "done"]
    assert "the checkpoint cannot hold this row (TypeError" in out["error"][1]
    assert "runs again when the batch is resumed" in out["error"][1]
    assert out["text"][1] == "answer b"  # what the run said is still in the table
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    written = {line["prompt"]: line["status"] for line in lines if "prompt" in line}
    assert written == {"a": "done", "b": "failed", "c": "done"}
    again = Counting()
    await again.agent().map(["a", "b", "c"], checkpoint=path, progress=None)
    assert again.prompts == ["b"]
