"""Pydantic models below the top of an output type: in a dataclass, a TypedDict, a list, an
Optional. Each compiles into the run's schema, validates, and comes back as model instances."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, TypedDict

import pytest

from nbagent import Agent
from nbagent.generation import Request
from nbagent.models import Call, FunctionModel, Turn
from nbagent.output import ANSWER_TOOL, output_spec, to_json
from nbagent.tools import tool
from tests.test_output import replies

pydantic = pytest.importorskip("pydantic", reason="pydantic is not installed")


class Address(pydantic.BaseModel):
    city: str
    zip: int


class Person(pydantic.BaseModel):
    name: str
    home: Address


@dataclasses.dataclass
class Order:
    buyer: Person
    ship_to: list[Address]
    bill_to: Optional[Address] = None  # noqa: UP045 - the spelling under test


class Shipment(TypedDict):
    label: str
    to: Address


ORDER = {
    "buyer": {"name": "Ann", "home": {"city": "Bern", "zip": 3000}},
    "ship_to": [{"city": "Basel", "zip": 4000}, {"city": "Chur", "zip": 7000}],
    "bill_to": None,
}


async def test_models_in_a_dataclass_answer_as_instances_natively() -> None:
    import json

    model = replies(json.dumps(ORDER))
    result = await Agent(model).run("the order", output=Order)
    order = result.output
    assert isinstance(order, Order) and isinstance(order.buyer, Person)
    assert isinstance(order.buyer.home, Address) and order.buyer.home.zip == 3000
    assert [type(a) for a in order.ship_to] == [Address, Address] and order.bill_to is None
    assert to_json(order) == ORDER
    schema = model.requests[0].answer_format.schema  # type: ignore[union-attr]
    buyer = schema["properties"]["buyer"]
    assert buyer["properties"]["home"]["$ref"].removeprefix("#/$defs/") in schema["$defs"]


async def test_a_nested_model_that_rejects_the_answer_sends_it_back() -> None:
    import json

    wrong = dict(ORDER, bill_to={"city": "Zug", "zip": "six"})
    model = replies(
        json.dumps(wrong), json.dumps(dict(ORDER, bill_to={"city": "Zug", "zip": 6300}))
    )
    result = await Agent(model).run("the order", output=Order)
    assert isinstance(result.output.bill_to, Address) and result.output.bill_to.zip == 6300
    told = str(model.requests[1].messages[-1])
    assert "bill_to" in told and "zip" in told  # where the first answer was wrong


async def test_a_list_of_models_through_the_final_answer_tool() -> None:
    rows = [{"city": "Bern", "zip": 3000}, {"city": "Genf", "zip": 1200}]

    def decide(request: Request) -> Any:
        return Turn(Call(ANSWER_TOOL, {"value": rows}))

    result = await Agent(FunctionModel(decide)).run("addresses", output=list[Address])
    assert result.output == [Address(city="Bern", zip=3000), Address(city="Genf", zip=1200)]
    assert all(isinstance(a, Address) for a in result.output)


async def test_an_optional_model_and_a_typeddict_holding_one() -> None:
    def decide(request: Request) -> Any:
        return Turn(Call(ANSWER_TOOL, {"value": None}))

    none = await Agent(FunctionModel(decide)).run("x", output=Optional[Person])  # noqa: UP045
    assert none.output is None and none.stop_reason == "terminated"
    spec = output_spec(Optional[Person])  # noqa: UP045
    assert spec.decode({"name": "B", "home": {"city": "C", "zip": 1}}) == Person(
        name="B", home=Address(city="C", zip=1)
    )

    def shipment(request: Request) -> Any:
        return Turn(Call(ANSWER_TOOL, {"label": "L1", "to": {"city": "Thun", "zip": 3600}}))

    typed = await Agent(FunctionModel(shipment)).run("x", output=Shipment)
    assert typed.output == {"label": "L1", "to": Address(city="Thun", zip=3600)}
    assert isinstance(typed.output["to"], Address)


def test_a_model_with_no_schema_is_refused_naming_why() -> None:
    class Odd(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        thing: object.__class__  # a type: pydantic validates it but has no JSON Schema for it

    @dataclasses.dataclass
    class Holder:
        odd: Odd

    from nbagent.errors import OutputTypeError

    with pytest.raises(OutputTypeError, match="Odd"):
        output_spec(Holder)


async def test_a_tool_parameter_may_be_a_model_too() -> None:
    seen: list[Any] = []

    @tool
    def ship(to: Address, also: list[Address]) -> str:
        """Ship to an address."""
        seen.append((to, also))
        return "shipped"

    calls = iter([Turn(Call("ship", {"to": {"city": "Bern", "zip": 3000}, "also": []})), "done"])
    result = await Agent(FunctionModel(lambda request: next(calls)), tools=[ship]).run("go")
    assert result.text == "done" and seen == [(Address(city="Bern", zip=3000), [])]
