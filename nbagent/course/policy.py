"""The course policy a teacher ships beside the notebooks: ``nbagent-course.toml``.

Found from the notebook's folder upward (the first ``nbagent-course.toml`` on the way to the
root), or named by ``NBAGENT_COURSE_POLICY`` (a JupyterHub sets it for every student; a file it
names that cannot be read refuses every run, saying why). Top-level keys apply to every
notebook; each ``[[notebooks]]`` table applies to the notebooks its ``match`` globs name, later
tables over earlier ones. A glob names the notebooks whose path ends with it, in the policy's
folder or in any folder below it (``*`` stays within a folder, ``**`` crosses folders), so
``exams/*.ipynb`` is the course's ``exams/`` and every student's copy of it
(``submissions/ann/exams/``); a ``/`` first anchors it at the policy's folder
(:meth:`CoursePolicy.sections_for`). The keys (``docs/howto/course-policy.md`` says each one)::

    version = 1
    ai = true                      # false: %agent answers with `message` and sends nothing
    message = "..."                # what a refused student reads
    models = ["openai:gpt-4.1-*"]  # allowed model strings (globs: * is any text)
    default_model = "openai:gpt-4.1-mini"
    live = true                    # false: only replays of the recordings the course ships
    kernel_tools = true            # %agent --kernel
    notebook_tools = true          # %agent --notebook (the agent proposes edits of cells)
    mcp = true                     # tools of MCP servers
    auto_approve = true            # --approve auto (and NBAGENT_APPROVAL=auto)
    [budget.run]                   # also [budget.session] and [budget.notebook]
    tokens = 20000
    requests = 20
    usd = 0.05

The parser is strict: an unknown key, a value of the wrong type, a glob that cannot match, a
file over 256 KiB are :class:`CoursePolicyError`, naming the file and the key (TOML syntax
errors also the line): a policy that was misread would guide no one.

What a policy can do in a student's own kernel is guide honest use and leave a record; a person
who edits the file or calls an API directly is not stopped. Enforcement belongs at the model
gateway (see the how-to).
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from ..approvals._paths import glob_regex
from ..errors import NbagentError
from .provenance import sha256_digest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ENV",
    "FILENAME",
    "CoursePolicy",
    "CoursePolicyError",
    "Limit",
    "Rules",
    "find_policy",
    "load_policy",
    "parse_policy",
]

FILENAME = "nbagent-course.toml"
ENV = "NBAGENT_COURSE_POLICY"
MAX_BYTES = 256 * 1024
_MAX_LEVELS = 64  # folders looked at on the way up
_MAX_MODELS = 100
_MAX_SECTIONS = 200
_MAX_TEXT = 1000
_SCOPES = ("run", "session", "notebook")
_BOOLS = ("ai", "live", "kernel_tools", "notebook_tools", "mcp", "auto_approve")
_RULE_KEYS = frozenset({*_BOOLS, "message", "models", "default_model", "budget"})


class CoursePolicyError(NbagentError):
    """The course policy file cannot be read as a policy; the message names the file and key."""


@dataclass(frozen=True)
class Limit:
    """One budget: ``tokens`` (input + output), ``requests`` (model requests, retries too) and
    ``usd`` (money, from the price table), each None when unbounded."""

    tokens: int | None = None
    requests: int | None = None
    usd: float | None = None

    def merged(self, other: Limit) -> Limit:
        """``other``'s bounds over this one's (a section's budget over the top level's)."""
        return Limit(
            other.tokens if other.tokens is not None else self.tokens,
            other.requests if other.requests is not None else self.requests,
            other.usd if other.usd is not None else self.usd,
        )

    @property
    def empty(self) -> bool:
        return self.tokens is None and self.requests is None and self.usd is None


@dataclass(frozen=True)
class Rules:
    """The rules in force for one notebook. ``origin`` maps each rule given in the file to where
    (``"ai"``, ``"notebooks[2].ai"``, ``"budget.run.usd"``), for the refusal's sentence."""

    ai: bool = True
    message: str | None = None
    models: tuple[str, ...] | None = None
    default_model: str | None = None
    live: bool = True
    kernel_tools: bool = True
    notebook_tools: bool = True
    mcp: bool = True
    auto_approve: bool = True
    budgets: Mapping[str, Limit] = field(default_factory=dict)
    origin: Mapping[str, str] = field(default_factory=dict)

    def budget(self, scope: str) -> Limit:
        return self.budgets.get(scope, Limit())

    def said(self, rule: str) -> str:
        """A rule as the file wrote it, for a refusal: ``notebooks[1].ai = false`` (a rule
        the file leaves out: its key alone)."""
        key = self.origin.get(rule, rule)
        value = getattr(self, rule, None) if "." not in rule else None
        if value is None and rule.startswith("budget."):
            _, scope, part = rule.split(".")
            value = getattr(self.budget(scope), part)
        return f"{key} = {describe_value(value)}" if value is not None else key

    def model_allowed(self, model: str) -> bool:
        """Whether ``model`` (``provider:name``) matches an allowed pattern (no list: any)."""
        if self.models is None:
            return True
        return any(fnmatch.fnmatchcase(model, pattern) for pattern in self.models)


@dataclass(frozen=True)
class _Section:
    index: int
    patterns: tuple[str, ...]
    regexes: tuple[re.Pattern[str], ...]
    values: Mapping[str, Any]


@dataclass(frozen=True)
class CoursePolicy:
    """A policy file as read: where it is, the digest of its bytes, its top-level rules and
    sections. :meth:`for_notebook` gives the rules for one notebook."""

    path: Path
    digest: str
    top: Mapping[str, Any]
    sections: tuple[_Section, ...] = ()
    from_env: bool = False

    @property
    def folder(self) -> Path:
        return self.path.parent

    def sections_for(
        self, notebook: str | None, folder: str | None, *, inside: bool = True
    ) -> list[int]:
        """The sections that apply to the notebook at ``notebook`` (``/``-separated, relative
        to the policy's folder; ``inside=False``: the notebook is not below that folder, and
        ``notebook`` is its absolute path), or, when its name is unknown, to any notebook in
        ``folder`` (a section applies when its glob's folder part matches it).

        A glob names the notebooks its path ends with, from the policy's folder or from any
        folder below it (or, outside it, any folder of the notebook's path): ``exams/*.ipynb``
        is the course's ``exams/`` and every student's (``submissions/ann/exams/``), as
        ``*.ipynb`` is every notebook. A glob that starts with ``/`` is matched from the
        policy's folder only."""
        found = []
        for section in self.sections:
            pairs = zip(section.patterns, section.regexes, strict=True)
            if notebook is not None:
                hit = any(_path_matches(p, r, notebook, inside) for p, r in pairs)
            elif folder is not None:
                hit = any(_folder_matches(p, folder, inside) for p, _ in pairs)
            else:
                hit = False
            if hit:
                found.append(section.index)
        return found

    def for_notebook(
        self, notebook: str | None, folder: str | None = None, *, inside: bool = True
    ) -> Rules:
        """The rules for one notebook (see :meth:`sections_for`): the top level, then each
        section that applies, in file order, a later one's keys over an earlier one's."""
        rules = _apply(Rules(), self.top, "")
        for index in self.sections_for(notebook, folder, inside=inside):
            section = self.sections[index - 1]
            rules = _apply(rules, section.values, f"notebooks[{index}].")
        return rules


def _tails(path: str, anchored: bool, inside: bool) -> list[str]:
    """The endings of ``path`` a glob is matched against (see :meth:`CoursePolicy.sections_for`):
    the whole path and each part after a folder; an anchored glob, the whole path only, and
    only below the policy's folder."""
    parts = [p for p in path.split("/") if p]
    if anchored:
        return ["/".join(parts)] if inside else []
    return ["/".join(parts[i:]) for i in range(len(parts) + 1)]


def _path_matches(pattern: str, regex: re.Pattern[str], notebook: str, inside: bool) -> bool:
    return any(regex.fullmatch(t) for t in _tails(notebook, pattern.startswith("/"), inside))


def _folder_matches(pattern: str, folder: str, inside: bool) -> bool:
    parent = str(PurePosixPath(pattern.lstrip("/")).parent)
    regex = glob_regex("" if parent == "." else parent)
    return any(regex.fullmatch(t) for t in _tails(folder, pattern.startswith("/"), inside))


def _apply(rules: Rules, values: Mapping[str, Any], prefix: str) -> Rules:
    changes: dict[str, Any] = {}
    origin = dict(rules.origin)
    for key, value in values.items():
        if key == "budget":
            budgets = dict(rules.budgets)
            for scope, limit in value.items():
                budgets[scope] = budgets.get(scope, Limit()).merged(limit)
                for part in ("tokens", "requests", "usd"):
                    if getattr(limit, part) is not None:
                        origin[f"budget.{scope}.{part}"] = f"{prefix}budget.{scope}.{part}"
            changes["budgets"] = budgets
        else:
            changes[key] = value
            origin[key] = f"{prefix}{key}"
    return replace(rules, **changes, origin=origin)


# --- finding and reading -------------------------------------------------------------------


def find_policy(start: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The policy file for a notebook in the folder ``start``: the one ``NBAGENT_COURSE_POLICY``
    names (whether or not it exists: a missing one is an error when read), else the first
    ``nbagent-course.toml`` from ``start`` upward; None when there is none."""
    env = os.environ if environ is None else environ
    named = env.get(ENV, "").strip()
    if named:
        return Path(os.path.expanduser(named))
    folder = start
    for _ in range(_MAX_LEVELS):
        candidate = folder / FILENAME
        try:
            if candidate.is_file():
                return candidate
        except OSError:
            return None
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def load_policy(path: Path, *, from_env: bool = False) -> CoursePolicy:
    """Read and check the policy at ``path`` (see the module); :class:`CoursePolicyError` if
    it cannot be read, is not TOML, or breaks a rule of the format."""
    shown = str(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise CoursePolicyError(
            f"the course policy {shown} cannot be read ({exc.strerror or exc})"
        ) from None
    return parse_policy(data, path, from_env=from_env)


def parse_policy(data: bytes, path: Path, *, from_env: bool = False) -> CoursePolicy:
    """The policy whose file's bytes are ``data`` (its file at ``path``), checked as
    :func:`load_policy` checks one."""
    shown = str(path)
    if len(data) > MAX_BYTES:
        raise CoursePolicyError(f"{shown}: the course policy is over {MAX_BYTES // 1024} KiB")
    try:
        text = data.decode("utf-8")
        parsed = tomllib.loads(text)
    except UnicodeDecodeError:
        raise CoursePolicyError(f"{shown}: the course policy is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise CoursePolicyError(f"{shown}: not valid TOML: {exc}") from None
    top, sections = _check(parsed, shown)
    return CoursePolicy(path, sha256_digest(data), top, sections, from_env)


def _check(parsed: Mapping[str, Any], shown: str) -> tuple[dict[str, Any], tuple[_Section, ...]]:
    def fail(key: str, problem: str) -> CoursePolicyError:
        return CoursePolicyError(f"{shown}: {key}: {problem}")

    top_keys = {"version", "course", "notebooks", *_RULE_KEYS}
    for key in parsed:
        if key not in top_keys:
            raise fail(key, f"unknown key (known: {', '.join(sorted(top_keys))})")
    version = parsed.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise fail("version", f"this nbagent reads version 1, not {version!r}")
    course = parsed.get("course", {})
    if not isinstance(course, dict) or any(k != "name" for k in course):
        raise fail("course", "must be a table with only `name`")
    if "name" in course:
        _text(course["name"], "course.name", fail)
    top = _rules(parsed, "", fail)
    raw_sections = parsed.get("notebooks", [])
    if not isinstance(raw_sections, list) or not all(isinstance(s, dict) for s in raw_sections):
        raise fail("notebooks", "must be [[notebooks]] tables")
    if len(raw_sections) > _MAX_SECTIONS:
        raise fail("notebooks", f"at most {_MAX_SECTIONS} sections")
    sections = []
    for n, raw in enumerate(raw_sections, 1):
        where = f"notebooks[{n}]"
        for key in raw:
            if key not in _RULE_KEYS | {"match"}:
                raise fail(f"{where}.{key}", "unknown key")
        if "match" not in raw:
            raise fail(where, "needs `match`, the notebooks it applies to (e.g. 'exams/*.ipynb')")
        patterns = raw["match"]
        patterns = [patterns] if isinstance(patterns, str) else patterns
        if not isinstance(patterns, list) or not patterns:
            raise fail(f"{where}.match", "must be a glob or a list of globs")
        for pattern in patterns:
            _glob(pattern, f"{where}.match", fail)
        values = _rules(raw, f"{where}.", fail)
        regexes = tuple(glob_regex(p[1:] if p.startswith("/") else p) for p in patterns)
        sections.append(_Section(n, tuple(patterns), regexes, values))
    merged_default = top.get("default_model")
    models = top.get("models")
    if (
        merged_default
        and models is not None
        and not Rules(models=models).model_allowed(merged_default)
    ):
        raise fail("default_model", f"{merged_default!r} is not one of the allowed `models`")
    return top, tuple(sections)


def _rules(raw: Mapping[str, Any], where: str, fail: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in _BOOLS:
        if key in raw:
            if not isinstance(raw[key], bool):
                raise fail(f"{where}{key}", f"must be true or false, not {_shown(raw[key])}")
            values[key] = raw[key]
    if "message" in raw:
        values["message"] = _text(raw["message"], f"{where}message", fail)
    if "default_model" in raw:
        values["default_model"] = _model(raw["default_model"], f"{where}default_model", fail)
    if "models" in raw:
        models = raw["models"]
        if not isinstance(models, list) or len(models) > _MAX_MODELS:
            raise fail(f"{where}models", f"must be a list of at most {_MAX_MODELS} model globs")
        values["models"] = tuple(_model(m, f"{where}models", fail) for m in models)
    if "budget" in raw:
        values["budget"] = _budgets(raw["budget"], f"{where}budget", fail)
    return values


def _budgets(raw: Any, where: str, fail: Any) -> dict[str, Limit]:
    if not isinstance(raw, dict):
        raise fail(where, "must be a table: [budget.run], [budget.session], [budget.notebook]")
    out = {}
    for scope, limit in raw.items():
        key = f"{where}.{scope}"
        if scope not in _SCOPES:
            raise fail(key, f"unknown budget (known: {', '.join(_SCOPES)})")
        if not isinstance(limit, dict):
            raise fail(key, "must be a table of tokens, requests, usd")
        for part in limit:
            if part not in ("tokens", "requests", "usd"):
                raise fail(f"{key}.{part}", "unknown key (known: tokens, requests, usd)")
        for part in ("tokens", "requests"):
            value = limit.get(part)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise fail(f"{key}.{part}", f"must be a positive whole number, not {_shown(value)}")
        usd = limit.get("usd")
        if usd is not None and (
            isinstance(usd, bool)
            or not isinstance(usd, (int, float))
            or not math.isfinite(usd)
            or usd <= 0
        ):
            raise fail(f"{key}.usd", f"must be a positive number of dollars, not {_shown(usd)}")
        out[scope] = Limit(
            limit.get("tokens"), limit.get("requests"), None if usd is None else float(usd)
        )
    return out


def _text(value: Any, key: str, fail: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise fail(key, f"must be a non-empty string, not {_shown(value)}")
    if len(value) > _MAX_TEXT:
        raise fail(key, f"is {len(value)} characters; at most {_MAX_TEXT}")
    return value.strip()


def _model(value: Any, key: str, fail: Any) -> str:
    text = _text(value, key, fail)
    if len(text) > 200 or any(c.isspace() for c in text):
        raise fail(key, f"{text[:60]!r} is not a model string (provider:model, no spaces)")
    if "[" in text or "]" in text:
        raise fail(key, f"{text!r}: model globs take * and ? only")
    return text


def _glob(pattern: Any, key: str, fail: Any) -> None:
    if not isinstance(pattern, str) or not pattern.strip():
        raise fail(key, f"must be a glob such as 'exams/*.ipynb', not {_shown(pattern)}")
    if len(pattern) > 500:
        raise fail(key, "a glob of over 500 characters")
    problem = None
    if pattern.startswith(("//", "~")) or re.match(r"^[A-Za-z]:", pattern):
        problem = (
            "must be relative to the policy's folder (a single / first matches from that "
            "folder only)"
        )
    elif "\\" in pattern:
        problem = "write folders with /"
    elif any(part in ("..", ".") for part in pattern.lstrip("/").split("/")):
        problem = "may not hold '.' or '..' (it is relative to the policy's folder)"
    elif "[" in pattern or "]" in pattern or "{" in pattern:
        problem = "takes *, ** and ? only ([...] and {...} are not globs here)"
    elif any(ord(c) < 32 for c in pattern):
        problem = "holds a control character"
    elif not pattern.endswith((".ipynb", "*")):
        problem = "names no notebook (end it in .ipynb or *)"
    if problem:
        raise fail(key, f"{pattern!r} {problem}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def describe_value(value: Any) -> str:
    """A rule's value as written in TOML (for sentences: ``ai = false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
