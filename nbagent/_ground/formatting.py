"""The person's objects formatted for a front end, bounded in time and size: :class:`Formatter`.

A front end shows what a tool returned (its value, a table's cells, a progress update), a run's
error, a typed answer, a name a prompt interpolates. Each of these is, or holds, one of the
person's objects, whose ``__str__``, ``__repr__``, ``__format__``, ``_repr_markdown_``,
properties and ``__getattr__`` are code that may raise, spin, block, recurse or answer with a
gigabyte. A front end never calls that code itself: it asks a :class:`Formatter`, which runs it
on a :class:`~nbagent._ground.guard.Reader`'s worker (the caller waits at most ``timeout`` seconds;
a call that runs over is stopped), keeps at most ``max_chars`` of any text it gives back, and
where the object could not be read gives a stand-in that names the object's type and says why
in one sentence, built without calling the object again:
``<Evil: its __str__ raised ValueError: boom>``.

Exact builtin values (``str``, ``int``, ``float``, ``bool``, ``None``) are read directly: no
user code runs for them, and no thread is started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from .guard import Reader, Unreadable, defines, exact, type_attribute

__all__ = [
    "FORMAT_CHARS",
    "FORMAT_TIMEOUT",
    "Formatter",
    "Unreadable",
    "cut",
    "error_text",
    "formatted",
    "stand_in",
    "traceback_text",
]

T = TypeVar("T")

#: Seconds one of the person's objects may take to format itself for a front end (all the
#: reads of one value together, when they are made in one :meth:`Formatter.read`).
FORMAT_TIMEOUT = 2.0
#: Characters of one formatted object a front end keeps; a marker says how many were cut.
FORMAT_CHARS = 100_000

_EXACT: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def stand_in(value: Any, why: str) -> str:
    """``<TypeName: why>``: what a front end shows for an object it could not read (``why`` is
    one sentence, e.g. "its __str__ raised ValueError: boom"). The type's name is read as
    ``type`` stores it: neither the object nor its metaclass is asked."""
    kind = type(value)
    name = type_attribute(kind, "__qualname__") or "object"
    module = type_attribute(kind, "__module__")
    if module and module not in ("builtins", "__main__"):
        name = f"{module}.{name}"
    return f"<{name}: {why}>"


def cut(text: str, limit: int) -> str:
    """``text`` kept to ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters not shown]"


def _as_text(value: Any, how: str) -> str:
    """On the worker: ``str(value)`` or ``repr(value)``, which must be a ``str``."""
    text = str(value) if how == "str" else repr(value)
    if type(text) is not str:  # a subclass of str could carry methods of its own
        raise TypeError(f"__{how}__ returned {type_attribute(type(text), '__qualname__')}")
    return text


class Formatter:
    """Runs the person's code for a front end, bounded (see the module).

    Use one per thing shown (a result, an error) as a context manager: its worker then ends
    with it. :meth:`read` runs a function that may call anything of the person's (several
    reads of one value in one call share one ``timeout``); :meth:`text` is ``str()`` or
    ``repr()`` of a value that never raises.
    """

    def __init__(
        self,
        timeout: float | None = None,
        max_chars: int | None = None,
        *,
        name: str = "format",
    ) -> None:
        # the module's bounds are read now, not when this was defined: a test may lower them
        self.timeout = FORMAT_TIMEOUT if timeout is None else timeout
        self.max_chars = FORMAT_CHARS if max_chars is None else max_chars
        timeout = self.timeout
        self._reader = Reader(timeout, name=name)

    def __enter__(self) -> Formatter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._reader.close()

    def read(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` run where the person's code may run (``fn`` may call any of it), or
        :class:`Unreadable` saying that ``what`` (e.g. "its table") raised, did not finish
        within ``timeout`` seconds, or could not be read. What ``fn`` returns must be plain
        data the caller can use without calling the person's code again."""
        return self._reader.call(what, fn, *args)

    def read_text(
        self,
        value: Any,
        *,
        how: Literal["str", "repr"] = "str",
        limit: int | None = None,
    ) -> str:
        """``str(value)`` (or ``repr``) cut to ``limit`` (``max_chars``); :class:`Unreadable`
        saying why when it could not be read."""
        limit = self.max_chars if limit is None else min(limit, self.max_chars)
        if exact(value, _EXACT):
            return cut(value if type(value) is str and how == "str" else repr(value), limit)
        return cut(self.read(f"its __{how}__", _as_text, value, how), limit)

    def text(
        self,
        value: Any,
        *,
        how: Literal["str", "repr"] = "str",
        limit: int | None = None,
    ) -> str:
        """``str(value)`` (or ``repr``) cut to ``limit`` (``max_chars``), or its stand-in."""
        try:
            return self.read_text(value, how=how, limit=limit)
        except Unreadable as exc:
            return stand_in(value, str(exc))


def formatted(
    value: Any,
    *,
    how: Literal["str", "repr"] = "str",
    limit: int | None = None,
    timeout: float | None = None,
) -> str:
    """One value's text, bounded (a :class:`Formatter` of its own): never raises."""
    limit = FORMAT_CHARS if limit is None else limit
    if exact(value, _EXACT):
        return cut(value if type(value) is str and how == "str" else repr(value), limit)
    with Formatter(timeout, limit) as formatter:
        return formatter.text(value, how=how)


def _plain_chain(error: BaseException) -> bool:
    """Whether ``error`` and every exception in its chain (causes, contexts) format without
    code of anyone's: classes that keep ``BaseException``'s own ``__str__`` and attribute
    lookups, with arguments and notes of builtin types (most exceptions). Read through
    ``BaseException``'s own descriptors."""
    cause = BaseException.__dict__["__cause__"]
    context = BaseException.__dict__["__context__"]
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        one = pending.pop()
        if id(one) in seen:
            continue
        seen.add(id(one))
        if len(seen) > 100:
            return False
        kind = type(one)
        if any(defines(kind, name, BaseException) for name in _OWN_CODE):
            return False
        args = _ARGS.__get__(one)
        if type(args) is not tuple or not all(exact(a, _EXACT) for a in args):
            return False  # BaseException.__str__ asks each argument for its text
        try:
            notes = object.__getattribute__(one, "__dict__").get("__notes__")
        except AttributeError:
            notes = None
        if notes is not None and not (type(notes) is list and all(type(n) is str for n in notes)):
            return False
        for link in (cause.__get__(one), context.__get__(one)):
            if link is not None:
                pending.append(link)
    return True


_ARGS = BaseException.__dict__["args"]
#: What an exception's class may define that formatting it would run.
_OWN_CODE = ("__str__", "__repr__", "__getattr__", "__getattribute__", "__notes__")


def error_text(error: BaseException, *, limit: int | None = None, name: bool = True) -> str:
    """``TypeName: message`` of an exception, bounded (its ``__str__`` may be the person's:
    an exception a hook or a tool raised); just ``TypeName`` when it has no message.
    ``name=False``: the message alone."""
    limit = FORMAT_CHARS if limit is None else limit
    if _plain_chain(error):
        message = cut(BaseException.__str__(error), limit)
    else:
        message = formatted(error, limit=limit)
    if not name:
        return message
    called = type_attribute(type(error), "__name__") or "an exception"
    return f"{called}: {message}" if message else called


def traceback_text(error: BaseException, *, only: bool = False) -> str:
    """The traceback Python would print for ``error`` (``only``: its last line alone), bounded:
    every exception of its chain is asked for its ``__str__``, on a worker unless none of them
    has one of its own. When it cannot be made, the exception's type and a line saying why."""
    import traceback

    def made() -> str:
        if only:
            return "".join(traceback.format_exception_only(type(error), error))
        return "".join(traceback.format_exception(type(error), error, error.__traceback__))

    if _plain_chain(error):
        return cut(made(), FORMAT_CHARS)
    with Formatter(name="traceback") as formatter:
        try:
            return cut(formatter.read("it", made), FORMAT_CHARS)
        except Unreadable as exc:
            name = type_attribute(type(error), "__qualname__") or "an exception"
            return f"{name}\n(its traceback could not be shown: {exc})\n"
