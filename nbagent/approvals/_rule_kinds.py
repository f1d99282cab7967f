"""What JSON types a tool's argument may take, as far as an approval rule needs to know.

A rule's pattern is a glob for a string and a JSON literal for anything else, so a rule is
checked against its tool's schema when it is made
(:meth:`nbagent.approvals.rules.ApprovalRule.check`): these read the types a subschema allows
(through same-document ``$ref``, ``enum``, ``const``, ``anyOf`` and ``oneOf``), and whether a
literal fits them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["kinds_of", "literal_fits"]


def literal_fits(value: Any, kinds: set[str]) -> bool:
    if value is None:
        return "null" in kinds
    if isinstance(value, bool):
        return "boolean" in kinds
    if isinstance(value, int):
        return bool(kinds & {"integer", "number"})
    return "number" in kinds


def _resolve(node: Any, root: Mapping[str, Any]) -> Any:
    for _ in range(16):
        ref = node.get("$ref") if isinstance(node, Mapping) else None
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return node
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                return {}
            target = target[part]
        node = target
    return {}


def kinds_of(node: Any, root: Mapping[str, Any], depth: int = 0) -> set[str]:
    """The JSON types a (sub)schema allows, as far as a rule needs to know ("any" if open)."""
    node = _resolve(node, root)
    if node is True or node == {} or depth > 8:
        return {"any"}
    if not isinstance(node, Mapping):
        return set()
    kinds: set[str] = set()
    kind = node.get("type")
    if isinstance(kind, str):
        kinds.add(kind)
    elif isinstance(kind, list):
        kinds.update(str(k) for k in kind)
    values = list(node.get("enum", ())) + ([node["const"]] if "const" in node else [])
    for value in values:
        if isinstance(value, bool):
            kinds.add("boolean")
        elif value is None:
            kinds.add("null")
        elif isinstance(value, (int, float)):
            kinds.add("number")
        elif isinstance(value, str):
            kinds.add("string")
        else:
            kinds.add("object")
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, ()) or ():
            kinds |= kinds_of(branch, root, depth + 1)
    if not kinds:
        return {"any"}
    return kinds
