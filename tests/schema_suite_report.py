"""Run the official JSON-Schema-Test-Suite (Draft 2020-12) through nbagent's strict schema policy.

``tests/test_schema_suite.py`` asserts every group with :func:`evaluate_group`; run this module for
the figures::

    .venv/bin/python -m tests.schema_suite_report
    .venv/bin/python tests/schema_suite_report.py

The suite is found beside the clone (``../shared/jsonschema-test-suite``) or at the path in
``NBAGENT_JSON_SCHEMA_SUITE``. What each group must do under the policy (DESIGN.md rules 2 and 3):

* a schema the policy forbids (``$id``, ``$recursiveRef``, ``$recursiveAnchor``, a foreign
  ``$schema``, a reference that is not same-document) must raise ``SchemaError`` whose pointer
  names a location in the schema;
* ``format`` and ``content*`` are annotations: every instance in ``format.json``,
  ``optional/format/*`` and ``content.json`` must be valid;
* a group listed in :data:`DEVIATIONS` must behave exactly as the table says (so a deviation that
  disappears fails too);
* every other test must agree with the suite's ``valid``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbagent.errors import ArgumentsError, SchemaError
from nbagent.schema import SCHEMA_DIALECT, compile_schema

ENV_VAR = "NBAGENT_JSON_SCHEMA_SUITE"
DIALECT_DIR = "draft2020-12"
ANNOTATION_FILES = frozenset({"format.json", "content.json"})

_LEGACY_DEPENDENCIES = (
    "`dependencies` is a Draft 7 keyword that Draft 2020-12 split into `dependentRequired` and "
    "`dependentSchemas`; under the 2020-12 dialect it is an unknown keyword and ignored (the suite "
    "lists support for it as optional)"
)

# Groups whose results differ from the suite for a documented reason: (file, group description)
# -> reason. Such a group must accept every instance and the suite must expect at least one
# rejection; otherwise the entry is stale and the test fails.
DEVIATIONS: dict[tuple[str, str], str] = {
    ("optional/dependencies-compatibility.json", description): _LEGACY_DEPENDENCIES
    for description in (
        "single dependency",
        "multiple dependents required",
        "dependencies with escaped characters",
        "single schema dependency",
        "boolean subschemas",
        "schema dependencies with escaped characters",
    )
}


@dataclass(frozen=True)
class Case:
    """One suite test: an instance and whether the suite calls it valid."""

    description: str
    data: Any
    valid: bool


@dataclass(frozen=True)
class Group:
    """One suite group: a schema and its tests, from ``file`` (relative, POSIX)."""

    file: str
    index: int
    description: str
    schema: Any
    tests: tuple[Case, ...]

    @property
    def id(self) -> str:
        return f"{self.file}#{self.index}"

    @property
    def is_annotation(self) -> bool:
        return self.file in ANNOTATION_FILES or self.file.startswith("optional/format/")


@dataclass
class Outcome:
    """What happened to one group, and every way it broke the expectations."""

    group: Group
    rejected: bool = False
    error: str = ""
    passed: int = 0  # tests whose result agrees with the suite
    annotation: int = 0  # format tests the suite calls invalid, valid here by policy
    deviated: int = 0  # tests differing from the suite as DEVIATIONS documents
    problems: list[str] = field(default_factory=list)


def suite_dir() -> Path:
    """The suite's ``draft2020-12`` directory; FileNotFoundError says where it was looked for."""
    override = os.environ.get(ENV_VAR)
    if override:
        base = Path(override)
    else:
        base = Path(__file__).resolve().parents[1].parent / "shared" / "jsonschema-test-suite"
    candidates = [base / DIALECT_DIR, base / "tests" / DIALECT_DIR, base]
    for candidate in candidates:
        if candidate.name == DIALECT_DIR and candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"JSON-Schema-Test-Suite not found: looked for {DIALECT_DIR}/ in {base} "
        f"(set {ENV_VAR} to the suite's directory; CI keeps it in ../shared beside the clone)"
    )


def load_groups(root: Path | None = None) -> list[Group]:
    """Every group in ``*.json``, ``optional/*.json`` and ``optional/format/*.json``, sorted."""
    root = suite_dir() if root is None else root
    groups: list[Group] = []
    for path in sorted(root.rglob("*.json")):
        file = path.relative_to(root).as_posix()
        for index, raw in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            tests = tuple(Case(t["description"], t["data"], t["valid"]) for t in raw["tests"])
            groups.append(Group(file, index, raw["description"], raw["schema"], tests))
    return groups


def _walk_everything(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key, item
            yield from _walk_everything(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk_everything(item)


def policy_forbids(schema: Any) -> bool:
    """Independent, deliberately naive oracle: any forbidden key anywhere in the document."""
    for key, value in _walk_everything(schema):
        if key in {"$id", "$recursiveRef", "$recursiveAnchor"}:
            return True
        if key == "$schema" and value not in {SCHEMA_DIALECT, SCHEMA_DIALECT + "#"}:
            return True
        if key in {"$ref", "$dynamicRef"} and isinstance(value, str) and not value.startswith("#"):
            return True
    return False


def expects_rejection(group: Group) -> bool:
    """The naive oracle agrees with the policy's walk on every suite group, so no overrides."""
    return policy_forbids(group.schema)


def _pointer_exists(schema: Any, pointer: str) -> bool:
    node = schema
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def evaluate_group(group: Group) -> Outcome:
    """Compile and run one group under the policy; record every broken expectation."""
    outcome = Outcome(group)
    try:
        compiled = compile_schema(group.schema, require_object=False)
    except SchemaError as exc:
        outcome.rejected, outcome.error = True, str(exc)
        if not expects_rejection(group):
            outcome.problems.append(f"rejected, but the policy allows it: {exc}")
        elif not _pointer_exists(group.schema, exc.pointer):
            outcome.problems.append(f"pointer {exc.pointer!r} is not in the schema: {exc}")
        return outcome
    if expects_rejection(group):
        outcome.problems.append("compiled, but the policy must reject this schema")
        return outcome

    deviation = DEVIATIONS.get((group.file, group.description))
    for case in group.tests:
        ours = compiled.is_valid(case.data)
        raised = _validate_raises(compiled, case.data)
        if raised == ours:
            outcome.problems.append(f"{case.description}: is_valid and validate disagree")
        if group.is_annotation or deviation:
            if not ours:
                why = "annotations never fail" if group.is_annotation else "documented deviation"
                outcome.problems.append(f"{case.description}: rejected, but {why}")
            elif case.valid:
                outcome.passed += 1
            elif group.is_annotation:
                outcome.annotation += 1
            else:
                outcome.deviated += 1
        elif ours == case.valid:
            outcome.passed += 1
        else:
            outcome.problems.append(f"{case.description}: suite says valid={case.valid}")
    if deviation and not outcome.deviated:
        outcome.problems.append(f"documented deviation no longer happens ({deviation})")
    return outcome


def _validate_raises(compiled: Any, data: Any) -> bool:
    try:
        compiled.validate(data)
    except ArgumentsError:
        return True
    return False


def main() -> int:
    """Print the figures; exit status 1 if any group broke its expectation."""
    try:
        root = suite_dir()
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    outcomes = [evaluate_group(group) for group in load_groups(root)]
    tests = sum(len(o.group.tests) for o in outcomes)
    rejected = [o for o in outcomes if o.rejected]
    failed = [o for o in outcomes if o.problems]
    files = {o.group.file for o in outcomes}
    print(f"JSON-Schema-Test-Suite {DIALECT_DIR} at {root}")
    print(f"files:  {len(files)}")
    print(
        f"groups: {len(outcomes)} = {len(outcomes) - len(rejected)} compiled"
        f" + {len(rejected)} rejected by policy; {len(failed)} failed"
    )
    print(f"tests:  {tests}")
    print(f"  agree with the suite:              {sum(o.passed for o in outcomes)}")
    print(f"  in rejected groups (not run):      {sum(len(o.group.tests) for o in rejected)}")
    print(
        f"  format annotation (valid by policy, suite expects invalid): "
        f"{sum(o.annotation for o in outcomes)}"
    )
    print(f"  documented deviations:             {sum(o.deviated for o in outcomes)}")
    by_reason: dict[str, list[str]] = {}
    for (file, description), reason in DEVIATIONS.items():
        by_reason.setdefault(reason, []).append(f"{file} / {description}")
    for reason, where in by_reason.items():
        print(f"    {len(where)} groups ({', '.join(where)}): {reason}")
    print(f"  broken expectations:               {sum(len(o.problems) for o in outcomes)}")
    for outcome in failed:
        for problem in outcome.problems:
            print(f"    {outcome.group.id} ({outcome.group.description}): {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
