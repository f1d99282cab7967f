"""What a run's tokens cost, in US dollars, from a maintained price table: ``cost_usd``.

Prices come from ``genai-prices`` (the ``prices`` extra: pydantic's table, shipped with its
data, read offline; it never fetches an update unless asked, and nbagent never asks). A model
the table does not know, or a run with the extra not installed, has no price: ``None``, shown as
"price unknown", never a guess. A model that sends no billed request (the offline and scripted
models, a replayed recording, ``local:`` models run in this process) costs nothing.

The table is imported on the first price asked for (about 0.2 s, with pydantic), not when
nbagent is imported.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from ._ground.extras import missing
from .generation import Usage

__all__ = ["FREE", "cost_usd", "price_known", "priced_as", "table_missing", "usd_text"]

log = logging.getLogger("nbagent")

#: What a generator with no billed requests is priced as.
FREE = ("free", "")

# the vendor each nbagent adapter speaks to, as genai-prices names it
_VENDORS = {"OpenAIChat": "openai", "OpenAIResponses": "openai", "AnthropicMessages": "anthropic"}
_FREE_TYPES = ("OfflineModel", "ScriptedModel", "FunctionModel", "LocalChat", "ReplayGenerator")


def priced_as(generator: Any) -> tuple[str, str]:
    """``(vendor, model)`` the generator's requests are priced as: ``FREE`` for one that sends
    no billed request; vendor ``""`` for a server the table cannot tell (an OpenAI-compatible
    one: the model name alone then decides, if the table knows it)."""
    inner = getattr(generator, "inner", None)
    kind = type(generator).__name__
    if kind == "RecordingGenerator" and inner is not None:
        return priced_as(inner)
    if kind in _FREE_TYPES:
        fallback = getattr(generator, "fallback", None)
        return priced_as(fallback) if kind == "ReplayGenerator" and fallback else FREE
    model = str(getattr(generator, "model", "") or "")
    vendor = _VENDORS.get(kind, "")
    if vendor == "openai" and getattr(generator, "provider", "OpenAI") != "OpenAI":
        vendor = ""  # an OpenAI-compatible server (a gateway, Ollama): its own prices
    return vendor, model


def _calc(vendor: str, model: str, usage: Usage) -> float | None:
    try:
        import genai_prices
    except ImportError:
        return None
    try:
        priced = genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens or None,
                cache_write_tokens=usage.cache_write_tokens or None,
            ),
            model,
            provider_id=vendor or None,
        )
    except (LookupError, ValueError, TypeError, ArithmeticError) as exc:
        log.debug("no price for %s:%s: %s", vendor, model, exc)
        return None
    return float(priced.total_price)


@functools.lru_cache(maxsize=256)
def _known(vendor: str, model: str) -> bool:
    return _calc(vendor, model, Usage()) is not None


def table_missing() -> str | None:
    """Why no model has a price here, as one sentence with the install line (the ``prices``
    extra is not installed), or None when the table is there."""
    return missing("prices", "Knowing what a model's tokens cost")


def price_known(generator: Any) -> bool:
    """Whether :func:`cost_usd` can price this generator's requests."""
    vendor, model = priced_as(generator)
    return (vendor, model) == FREE or (bool(model) and _known(vendor, model))


def cost_usd(generator: Any, usage: Usage) -> float | None:
    """What ``usage`` cost on ``generator``'s model, in dollars; None when the price is unknown.
    (Input tokens count the cached ones too, as the providers report them.)"""
    vendor, model = priced_as(generator)
    if (vendor, model) == FREE:
        return 0.0
    if not model or not _known(vendor, model):
        return None
    return _calc(vendor, model, usage)


def usd_text(cost: float | None) -> str:
    """A cost as a person reads it: ``$0.0123``, ``$0`` or ``price unknown``."""
    if cost is None:
        return "price unknown"
    if cost == 0:
        return "$0"
    if cost < 0.01:  # a student's run costs fractions of a cent: keep its digits
        return "$" + f"{cost:.6f}".rstrip("0").rstrip(".") if cost >= 5e-7 else "<$0.000001"
    return f"${cost:.4f}" if cost < 1 else f"${cost:,.2f}"
