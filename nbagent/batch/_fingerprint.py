"""What a batch's answers depend on, as a fingerprint a checkpoint stores with every row.

A row read back from a checkpoint (or an earlier results table) counts as done only when it was
answered under the same configuration: the model, the instructions, the tools offered (their
definitions), the generation options, the output asked for, the approver and the conversation
each run starts from. The prompt is matched row by row already (its digest), so the template
is not part of it. A tool's *code* is not either: nothing can tell from outside whether a
change to a function changes its answers (use another checkpoint path after such a fix).

Each part is kept as a short digest, plus a label for the parts a person can read (the model,
the output type, the approver), so a mismatch can say what differs. Nothing secret goes in: the
model is named as ``provider:model`` (a file path by its name only), never with an address or
a key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._digest import definition_digest as _definition
from .._digest import digest as _digest
from ..redact import redact_secrets
from ._output import ANSWER_TOOL

if TYPE_CHECKING:
    from ..approvals.approval import Approver
    from ._run import RunPlan

__all__ = ["Fingerprint", "differences", "fingerprint"]

#: The parts, in the order a difference is told.
PARTS = ("model", "instructions", "tools", "options", "output", "approver", "conversation")


@dataclass(frozen=True)
class Fingerprint:
    """``id``: one digest of every part; ``parts``: each part's label or digest (JSON data)."""

    id: str
    parts: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **self.parts}


def _options(options: Any) -> Any:
    if options is None:
        return None
    choice = options.tool_choice
    return {
        "tool_choice": choice if isinstance(choice, str) else getattr(choice, "name", repr(choice)),
        "max_tokens": options.max_tokens,
        "temperature": options.temperature,
        "top_p": options.top_p,
        "stop": list(options.stop),
        "parallel_tool_calls": options.parallel_tool_calls,
        "extra": dict(options.extra),
    }


def model_label(model: str | None, generator: Any) -> str:
    """The model as a person names it: the batch's ``model=`` string, else ``Type:model`` of
    the agent's model (a model file by its name only: folders are nobody's business)."""
    name = _without_folders(
        redact_secrets(model if model is not None else str(getattr(generator, "model", "") or ""))
    )
    if model is not None:
        return name
    kind = type(generator).__name__
    return f"{kind}:{name}" if name and name != kind else kind


_PATH = re.compile(r"^(?:[/~\\]|[A-Za-z]:[/\\])")
_SEPARATOR = re.compile(r"[/\\]")


def _without_folders(name: str) -> str:
    """``/home/me/models/x.gguf`` as ``x.gguf``, ``local:/home/me/x.gguf`` as ``local:x.gguf``."""
    if _PATH.match(name):
        return _SEPARATOR.split(name)[-1]
    prefix, colon, rest = name.partition(":")
    if colon and _PATH.match(rest):
        return prefix + ":" + _SEPARATOR.split(rest)[-1]
    return name


def _approver(approver: Approver) -> str:
    """The approver as text: its kind, and for rules every rule and what comes after them."""
    from ..approvals.rules import RuleApprover

    if isinstance(approver, RuleApprover):
        rules = "; ".join(rule.text for rule in approver.rules)
        return f"RuleApprover({rules}) then {_approver(approver.fallback)}"
    return type(approver).__name__


def _output(plan: RunPlan) -> Any:
    spec = plan.output
    if spec is None:
        return None
    target = spec.target
    if target is None:
        label = "a JSON Schema"
    else:
        label = getattr(target, "__qualname__", None) or repr(target)
        if not isinstance(target, type):  # list[str], a Literal …: its own text says it
            label = repr(target).replace("typing.", "")
    return {"label": label, "digest": _digest({"schema": spec.schema, "wrapped": spec.wrapped})}


def fingerprint(plan: RunPlan, model: str | None) -> Fingerprint:
    """The fingerprint of ``plan``'s runs (``model``: the batch's model string, if any)."""
    agent = plan.agent
    offered = plan.tools if plan.tools is not None else list(agent.tools)
    instructions = agent.instructions
    if plan.output is not None:  # the answer tool and its instruction are the output's part
        offered = [name for name in offered if name != ANSWER_TOOL]
        suffix = plan.output.instruction
        if instructions == suffix:
            instructions = None
        elif instructions and instructions.endswith("\n\n" + suffix):
            instructions = instructions[: -len(suffix) - 2]
    tools = {name: _definition(agent.tools[name]) for name in offered if name in agent.tools}
    history = None
    if plan.keep_history and agent.messages:
        from ..messages import messages_to_json

        history = _digest(messages_to_json(agent.messages))
    parts: dict[str, Any] = {
        "model": model_label(model, agent.generator),
        "instructions": _digest(instructions) if instructions else None,
        "tools": tools,
        "options": _digest({"agent": _options(agent.options), "run": _options(plan.options)}),
        "output": _output(plan),
        "approver": _approver(plan.approver),
        "conversation": history,
    }
    return Fingerprint(_digest(parts), parts)


def differences(before: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """What differs between two fingerprints' parts, in words ("the instructions", "the model
    (a → b)" …); ``before`` None: an earlier one nobody described."""
    if not isinstance(before, dict):
        return ["a configuration the checkpoint does not describe"]
    out: list[str] = []
    for part in PARTS:
        old, new = before.get(part), now.get(part)
        if old == new:
            continue
        if part == "model":
            out.append(f"the model ({old} → {new})")
        elif part == "tools" and isinstance(old, dict) and isinstance(new, dict):
            added = sorted(set(new) - set(old))
            removed = sorted(set(old) - set(new))
            changed = sorted(n for n in set(old) & set(new) if old[n] != new[n])
            if added:
                out.append(f"tools added ({', '.join(added)})")
            if removed:
                out.append(f"tools removed ({', '.join(removed)})")
            if changed:
                out.append(f"the definition of {', '.join(changed)}")
        elif part == "output":
            old_label = old.get("label") if isinstance(old, dict) else None
            new_label = new.get("label") if isinstance(new, dict) else None
            if old_label != new_label:
                out.append(f"the output ({old_label or 'none'} → {new_label or 'none'})")
            else:
                out.append(f"the output's schema ({new_label})")
        elif part == "approver":
            out.append(f"the approver ({old} → {new})")
        elif part == "options":
            out.append("the generation options")
        elif part == "conversation":
            out.append("the conversation each run starts from")
        else:
            out.append(f"the {part}")
    return out or ["the configuration"]
