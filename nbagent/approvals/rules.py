"""Approval rules people can read: allow or deny a tool, or only calls whose arguments match.

A rule is written the way a person says it, and it is never broader than written::

    allow write_file path=data/*        # calls whose path is a file directly in data/
    allow write_file path=data/**       # ... anywhere under data/
    deny delete_file                    # every call to delete_file
    allow resize width=640 keep=true    # exact values for numbers and booleans

``ARG=PATTERN`` tests one named argument of the call; every one must match. A pattern on a
string is a glob that must match the whole value: ``*`` is any run of characters except ``/``
and ``\\``, ``**`` is any run of characters including them, ``?`` is one character (not ``/`` or
``\\``); everything else, brackets included, is literal. Wildcards never match control
characters. On a number, boolean or null the pattern is a JSON literal that must be equal
(``true`` is not ``1``).

A value may itself be a glob that the tool expands (``secr*/key``, ``s[e]crets/key``): it is
decided by every path it could name, in every common glob dialect at once. A deny pattern
matches it when any of those paths is denied (or could be: a value that climbs out with ``..``,
passes a symbolic link into denied ground, or is too large to compare); an allow pattern only
when every one of them is allowed; otherwise the call is asked. Both globs become automata and
are compared exactly, within a budget (``nbagent.approvals._globs``, ``nbagent.approvals._paths``).

So that "paths under ``data/``" cannot be walked out of, an *allow* pattern never matches a value
with a ``..`` path segment (unless the pattern itself has one), nor a path that leads through a
symbolic link to somewhere the pattern does not cover. A *deny* pattern is never narrower than
written: it matches a path in every spelling (``data/../secrets/k``, ``//secrets/k``,
``secrets\\k``, either Unicode normal form, absolute or relative to the working folder, ``~``
for home, through symbolic links to it) and where the system cuts it (at a NUL, as a C string
ends: ``secrets.txt\\x00.png``; trailing dots, spaces and ``:stream`` as Windows reads a
name), its wildcards match control characters too, it ignores
letter case where the working folder's filesystem does, it matches a string anywhere inside an
array or object argument, and ``secrets/**`` (or ``secrets/*``) also denies the folder
``secrets`` itself, through which a tool reaches everything in it. Links are followed as they
are when the rules are checked (see :mod:`nbagent.approvals._paths`).

``allow repeats TOOL [ARG=PATTERN ...]`` is a rule of a third kind: it lets calls to TOOL (those
whose arguments match) be made again and again with the same result without the run pausing
to ask whether to go on (see :mod:`nbagent.loop._repeats`). It decides no call.

Deny rules win over allow rules and hold for every call to their tool: one that needs no
approval, and one a person approved with edited arguments. A call no rule matches goes to the
approver behind the rules
(a person, or a policy). A rule from Python may add a predicate (``when=``); one that raises
denies the call, saying why. Rules are checked against the tool's schema when they are made
(:meth:`ApprovalRule.check`): an unknown argument, or one a pattern cannot test, is an error.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import shlex
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import NbagentError
from ..inspection.stepping import Resume
from ..schema import normalize_schema
from ._paths import allow_matches, deny_matches
from ._rule_kinds import kinds_of, literal_fits
from .approval import ApprovalRequest, Approver, Decision, DenyAll

if TYPE_CHECKING:
    from ..inspection.stepping import StepPause
    from ..tools import Tool

__all__ = ["ApprovalRule", "RuleApprover", "RuleError", "RuleSet", "parse_rule"]

Effect = Literal["allow", "deny", "repeat"]
Predicate = Callable[[Mapping[str, Any]], bool]

_TOOL = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ARGUMENT = re.compile(r"[^\s=]{1,128}")
#: Longest pattern a rule may hold (a rule is something a person reads).
MAX_PATTERN = 1_000
#: Rules one set may hold.
MAX_RULES = 500


class RuleError(NbagentError, ValueError):
    """A rule that cannot be made: bad syntax, an unknown tool or argument, an untestable type."""


def _scalars(value: Any, depth: int = 0) -> Iterator[Any]:
    """The strings, numbers, booleans and nulls inside ``value`` (arrays and objects opened)."""
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        if depth < 64:
            for item in value:
                yield from _scalars(item, depth + 1)
        return
    yield value


def _json_literal(text: str) -> tuple[bool, Any]:
    """Whether ``text`` is a JSON number, boolean or null, and its value. NaN, Infinity and
    numbers too large for a float are not: no argument can ever equal them (strict JSON)."""
    try:
        value = json.loads(text)
    except ValueError:
        return False, None
    if isinstance(value, (dict, list, str)):
        return False, None
    if isinstance(value, float) and not math.isfinite(value):
        return False, None
    return True, value


def _same_literal(a: Any, b: Any) -> bool:
    """JSON equality for scalars: a boolean equals only a boolean, a number only a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if a is None or b is None:
        return a is None and b is None
    return bool(a == b)


@dataclass(frozen=True)
class ApprovalRule:
    """Allow or deny calls to ``tool``, all of them or those whose arguments match ``where``.

    ``where``: ``(argument, pattern)`` pairs, all of which must match (see the module docs).
    ``when``: a predicate on the arguments, from Python (sync only; the loop runs the rules off
    its thread, bounded by ``Agent.hook_timeout``: one that overruns denies the call). ``label``
    names the predicate in the rule's text.
    """

    effect: Effect
    tool: str
    where: tuple[tuple[str, str], ...] = ()
    when: Predicate | None = field(default=None, compare=False, repr=False)
    label: str = ""

    def __post_init__(self) -> None:
        if self.effect not in ("allow", "deny", "repeat"):
            raise RuleError(f"a rule allows, denies or allows repeats, not {self.effect!r}")
        if not isinstance(self.tool, str) or not _TOOL.fullmatch(self.tool):
            raise RuleError(
                f"{self.tool!r} is not a tool name (1-64 letters, digits, '_' or '-'); a rule "
                "names exactly one tool"
            )
        seen: set[str] = set()
        for name, pattern in self.where:
            if not isinstance(name, str) or not _ARGUMENT.fullmatch(name):
                raise RuleError(f"{name!r} is not an argument name")
            if name in seen:
                raise RuleError(f"the rule tests {name!r} twice: write one pattern per argument")
            seen.add(name)
            if not isinstance(pattern, str):
                raise RuleError(
                    f"the pattern for {name!r} must be a string (a glob or a JSON literal), "
                    f"not {type(pattern).__name__}"
                )
            if len(pattern) > MAX_PATTERN:
                raise RuleError(f"the pattern for {name!r} is longer than {MAX_PATTERN} characters")
        if self.when is not None:
            if not callable(self.when):
                raise RuleError("when= must be a function of the arguments")
            if inspect.iscoroutinefunction(self.when):
                raise RuleError("when= must be a plain function (rules are checked at once)")

    @property
    def text(self) -> str:
        """The rule as a person writes it: ``allow write_file path=data/*``."""
        words = ["allow repeats" if self.effect == "repeat" else self.effect, self.tool]
        for name, pattern in self.where:
            shown = pattern if pattern and not re.search(r"[\s'\"\\]", pattern) else None
            words.append(
                f"{name}={shown}" if shown is not None else shlex.quote(f"{name}={pattern}")
            )
        if self.when is not None:
            words.append(f"when {self.label or _callable_name(self.when)}(arguments)")
        return " ".join(words)

    def __str__(self) -> str:
        return self.text

    def check(self, tool: Tool) -> None:
        """Raise :class:`RuleError` unless every argument the rule tests is one ``tool`` takes
        and a pattern can test (a string, number, boolean or null, by its schema)."""
        if tool.name != self.tool:
            raise RuleError(f"this rule is about {self.tool!r}, not {tool.name!r}")
        schema = normalize_schema(tool.input_schema)
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        for name, pattern in self.where:
            if name not in properties:
                known = ", ".join(properties) or "none"
                raise RuleError(f"{tool.name} has no argument {name!r} (its arguments: {known})")
            kinds = kinds_of(properties[name], schema)
            if not kinds or kinds & {"object", "array"} or "any" in kinds:
                raise RuleError(
                    f"a rule can test only string, number, boolean or null arguments; "
                    f"{tool.name}'s {name!r} may be something else"
                )
            literal, value = _json_literal(pattern)
            if "string" not in kinds and not literal:
                raise RuleError(
                    f"{tool.name}'s {name!r} is not a string: write a JSON value for it "
                    f"(e.g. {name}=3 or {name}=true), not {pattern!r}"
                )
            if "string" not in kinds and not literal_fits(value, kinds):
                raise RuleError(
                    f"{pattern!r} can never be {tool.name}'s {name!r} ({'|'.join(sorted(kinds))})"
                )

    def matches(self, tool_name: str, arguments: Any) -> bool:
        """Whether a call to ``tool_name`` with ``arguments`` is one this rule is about.

        A ``when`` predicate that raises propagates (the rule set turns it into a denial).
        """
        if tool_name != self.tool:
            return False
        if self.where and not isinstance(arguments, Mapping):
            return False
        for name, pattern in self.where:
            assert isinstance(arguments, Mapping)
            if name not in arguments or not self._value_matches(pattern, arguments[name]):
                return False
        if self.when is not None:
            return bool(self.when(arguments))
        return True

    def _value_matches(self, pattern: str, value: Any) -> bool:
        if self.effect == "deny":
            return any(self._denies(pattern, item) for item in _scalars(value))
        if isinstance(value, str):
            return allow_matches(pattern, value)
        if isinstance(value, (dict, list)):
            return False
        literal, expected = _json_literal(pattern)
        return literal and _same_literal(expected, value)

    @staticmethod
    def _denies(pattern: str, value: Any) -> bool:
        """Whether a deny pattern matches one scalar, in any spelling of it (never narrower
        than written: a path is denied however it is spelled, wherever it sits in an array)."""
        if isinstance(value, str):
            return deny_matches(pattern, value)
        literal, expected = _json_literal(pattern)
        return literal and _same_literal(expected, value)


def _callable_name(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or "a predicate"
    return str(name)[:64]


def parse_rule(text: str | Iterable[str]) -> ApprovalRule:
    """A rule from its text (``allow write_file path=data/*``) or its words.

    Quotes work as in a shell (``path="my data/*"``). Raises :class:`RuleError` saying what is
    wrong; the rule is not yet checked against the tool (see :meth:`ApprovalRule.check`).
    """
    if isinstance(text, str):
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise RuleError(f"cannot read the rule {text!r}: {exc}") from None
    else:
        words = list(text)
    if len(words) < 2 or words[0] not in ("allow", "deny"):
        raise RuleError(
            "write a rule as `allow TOOL [ARG=PATTERN ...]` or `deny TOOL [ARG=PATTERN ...]`"
        )
    if words[:2] == ["allow", "repeats"] and len(words) > 2 and "=" not in words[2]:
        words = ["repeat", *words[2:]]  # "allow repeats x=1" stays a rule about a tool "repeats"
    effect, tool, *conditions = words
    where: list[tuple[str, str]] = []
    for word in conditions:
        name, sep, pattern = word.partition("=")
        if not sep or not name:
            raise RuleError(
                f"{word!r} is not ARG=PATTERN: a rule tests named arguments, e.g. path=data/*"
            )
        where.append((name, pattern))
    return ApprovalRule(effect, tool, tuple(where))  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Numbered:
    number: int
    rule: ApprovalRule


class RuleSet:
    """Numbered rules, safe to change from any thread while runs consult them.

    :meth:`decide` gives the decision the rules make for a call, or None when none applies.
    ``tools`` (optional, a callable returning the registered tools by name) makes :meth:`add`
    check each rule against its tool's schema.
    """

    def __init__(
        self,
        rules: Iterable[ApprovalRule] = (),
        *,
        tools: Callable[[], Mapping[str, Tool]] | None = None,
        limit: int = MAX_RULES,
    ) -> None:
        self._lock = threading.Lock()
        self._rules: list[_Numbered] = []
        self._next = 1
        self.tools = tools
        self.limit = limit
        for rule in rules:
            self.add(rule)

    def add(self, rule: ApprovalRule) -> int:
        """Add ``rule`` (checked against its tool when the set knows the tools); its number.

        The same rule twice is kept once (the first number is returned).
        """
        if not isinstance(rule, ApprovalRule):
            raise RuleError(f"expected an ApprovalRule, got {type(rule).__name__}")
        if self.tools is not None:
            registered = self.tools()
            found = registered.get(rule.tool)
            if found is None:
                known = ", ".join(sorted(registered)) or "none"
                raise RuleError(f"there is no tool named {rule.tool!r} (tools: {known})")
            rule.check(found)
        with self._lock:
            for item in self._rules:
                if item.rule == rule and item.rule.when is rule.when:
                    return item.number
            if len(self._rules) >= self.limit:
                raise RuleError(f"at most {self.limit} rules; remove some first")
            number = self._next
            self._next += 1
            self._rules.append(_Numbered(number, rule))
            return number

    def remove(self, which: int | str) -> list[ApprovalRule]:
        """Remove rule number ``which``, or every rule about the tool named ``which``."""
        with self._lock:
            gone = [
                item
                for item in self._rules
                if (item.number == which if isinstance(which, int) else item.rule.tool == which)
            ]
            self._rules = [item for item in self._rules if item not in gone]
        return [item.rule for item in gone]

    def clear(self) -> int:
        """Remove every rule; how many there were."""
        with self._lock:
            count = len(self._rules)
            self._rules = []
        return count

    def numbered(self) -> list[tuple[int, ApprovalRule]]:
        """The rules in force with their numbers, oldest first."""
        with self._lock:
            return [(item.number, item.rule) for item in self._rules]

    def __iter__(self) -> Iterator[ApprovalRule]:
        return iter([rule for _, rule in self.numbered()])

    def __len__(self) -> int:
        with self._lock:
            return len(self._rules)

    def allows_tool(self, tool: str) -> bool:
        """True when a rule allows every call to ``tool`` (and no rule denies any)."""
        rules = list(self)
        return any(
            r.effect == "allow" and r.tool == tool and not r.where and not r.when for r in rules
        ) and not any(r.effect == "deny" and r.tool == tool for r in rules)

    def decide(self, tool: str, arguments: Any) -> Decision | None:
        """The decision the rules make for this call, or None when no rule is about it.

        Deny rules are consulted first. A rule whose predicate raises denies the call, naming
        the rule and the error: a broken check never lets a call through.
        """
        return self._first(tool, arguments, ("deny", "allow"))

    def denial(self, tool: str, arguments: Any) -> Decision | None:
        """The denial a deny rule makes for this call, or None (allow rules are not read)."""
        return self._first(tool, arguments, ("deny",))

    def repeat_rule(self, tool: str, arguments: Any) -> ApprovalRule | None:
        """The ``allow repeats`` rule that lets this call repeat without asking, or None (also
        when a rule's predicate raises: a broken check lets nothing through)."""
        for rule in self:
            try:
                if rule.effect == "repeat" and rule.matches(tool, arguments):
                    return rule
            except Exception:
                return None
        return None

    def _first(self, tool: str, arguments: Any, effects: tuple[Effect, ...]) -> Decision | None:
        rules = [rule for rule in self if rule.tool == tool]
        for effect in effects:
            for rule in rules:
                if rule.effect != effect:
                    continue
                try:
                    hit = rule.matches(tool, arguments)
                except Exception as exc:
                    return Decision(
                        False,
                        f"the rule `{rule.text}` could not be checked ({type(exc).__name__}: "
                        f"{exc}), so the call was not run",
                        by="rule",
                    )
                if hit:
                    return Decision(effect == "allow", rule.text, by="rule")
        return None


class RuleApprover:
    """Rules first (:class:`RuleSet`), then ``fallback`` for calls no rule is about.

    ``rules`` may be a RuleSet, ApprovalRules, or the older per-tool mapping
    (``{"read_file": "allow", "rm": "deny"}``; "ask" means no rule). A decision with
    ``always=True`` from the fallback becomes an "allow TOOL" rule. ``tools`` (optional) lets
    :meth:`allow` and :meth:`deny` check rules against the tools' schemas at once.
    """

    def __init__(
        self,
        rules: RuleSet | Iterable[ApprovalRule] | Mapping[str, str] | None = None,
        fallback: Approver | None = None,
        *,
        tools: Iterable[Tool] = (),
    ) -> None:
        known = {t.name: t for t in tools}
        if isinstance(rules, RuleSet):
            self.rules = rules
        else:
            self.rules = RuleSet(tools=(lambda: known) if known else None)
            if isinstance(rules, Mapping):
                for name, effect in rules.items():
                    if effect == "allow":
                        self.rules.add(ApprovalRule("allow", name))
                    elif effect == "deny":
                        self.rules.add(ApprovalRule("deny", name))
                    elif effect != "ask":
                        raise RuleError(f"{name}: a rule is 'allow', 'deny' or 'ask'")
            else:
                for rule in rules or ():
                    self.rules.add(rule)
        self.fallback: Approver = fallback or DenyAll()

    def allow(self, tool: str | Tool, *, when: Predicate | None = None, **where: Any) -> int:
        """Allow calls to ``tool`` whose arguments match ``where`` (and ``when``); its number."""
        return self._add("allow", tool, when, where)

    def deny(self, tool: str | Tool, *, when: Predicate | None = None, **where: Any) -> int:
        """Deny calls to ``tool`` whose arguments match ``where`` (and ``when``); its number."""
        return self._add("deny", tool, when, where)

    def _add(
        self, effect: Effect, tool: Any, when: Predicate | None, where: Mapping[str, Any]
    ) -> int:
        rule = make_rule(effect, tool, when, where)
        if not isinstance(tool, str):
            rule.check(tool)
        return self.rules.add(rule)

    def allow_always(self, tool_name: str) -> None:
        """Allow every call to ``tool_name`` (what "Always allow" does)."""
        self.rules.add(ApprovalRule("allow", tool_name))

    def known_decision(self, request: ApprovalRequest) -> Decision | None:
        decided = self.rules.decide(request.tool_name, request.input)
        if decided is not None:
            return decided
        known = getattr(self.fallback, "known_decision", None)
        return known(request) if known is not None else None

    def forbidden(self, request: ApprovalRequest) -> Decision | None:
        """The denial a deny rule (here or in the fallback) makes for this call, or None.

        The loop reads it for every call, also those that need no approval and those a person
        approved with edited arguments: ``deny TOOL`` means every call to TOOL.
        """
        denied = self.rules.denial(request.tool_name, request.input)
        if denied is not None:
            return denied
        deeper = getattr(self.fallback, "forbidden", None)
        return deeper(request) if deeper is not None else None

    def allow_repeats(
        self, tool: str | Tool, *, when: Predicate | None = None, **where: Any
    ) -> int:
        """Let calls to ``tool`` (matching ``where`` and ``when``) repeat without asking."""
        return self._add("repeat", tool, when, where)

    def known_resume(self, pause: StepPause) -> Resume | None:
        """At a ``"repeat"`` pause, go on when an ``allow repeats`` rule is about the call."""
        if pause.kind != "repeat" or not pause.calls:
            return None
        call = pause.calls[0]
        try:
            arguments = call.input
        except Exception:  # arguments that are not JSON: only a rule with no test can match
            arguments = None
        rule = self.rules.repeat_rule(call.name, arguments)
        return Resume("next", by=rule.text) if rule is not None else None

    @property
    def pause(self) -> Any:
        """Pauses go to the fallback (rules decide calls, not pauses): its ``pause``, or None
        when it cannot pause (then the run cannot step, and a repeat stops the run). Going on
        to the end at a ``"repeat"`` pause keeps ``allow repeats TOOL`` as a rule."""
        inner = getattr(self.fallback, "pause", None)
        if inner is None:
            return None

        async def pause(pause: StepPause) -> Any:
            resume = inner(pause)
            if inspect.isawaitable(resume):
                resume = await resume
            if pause.kind == "repeat" and getattr(resume, "action", "") == "run" and pause.calls:
                try:
                    self.rules.add(ApprovalRule("repeat", pause.calls[0].name))
                except RuleError as exc:  # the answer stands; only "from now on" could not
                    import logging

                    logging.getLogger("nbagent").warning("could not keep the rule: %s", exc)
            return resume

        return pause

    async def decide(self, request: ApprovalRequest) -> Decision:
        known = self.known_decision(request)
        if known is not None:
            return known
        decision = await self.fallback.decide(request)
        if isinstance(decision, Decision) and decision.approved and decision.always:
            try:
                self.allow_always(request.tool_name)
            except RuleError as exc:  # the approval stands; only "from now on" could not
                import logging

                logging.getLogger("nbagent").warning(
                    "could not keep 'allow %s' as a rule: %s", request.tool_name, exc
                )
        return decision


def make_rule(
    effect: Effect, tool: Any, when: Predicate | None, where: Mapping[str, Any]
) -> ApprovalRule:
    """A rule from Python values: ``where`` values may be globs (strings) or JSON scalars."""
    name = tool if isinstance(tool, str) else getattr(tool, "name", None)
    if not isinstance(name, str):
        raise RuleError(f"a rule names a tool (a name or a Tool), not {type(tool).__name__}")
    pairs: list[tuple[str, str]] = []
    for argument, pattern in where.items():
        if isinstance(pattern, str):
            pairs.append((argument, pattern))
        elif isinstance(pattern, float) and not math.isfinite(pattern):
            raise RuleError(f"{argument}=: {pattern} can never be an argument's value")
        elif pattern is None or isinstance(pattern, (bool, int, float)):
            pairs.append((argument, json.dumps(pattern)))
        else:
            raise RuleError(
                f"{argument}=: give a glob string or a number, boolean or None, "
                f"not {type(pattern).__name__}"
            )
    label = _callable_name(when) if when is not None else ""
    return ApprovalRule(effect, name, tuple(pairs), when, label)
