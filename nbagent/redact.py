"""Hide credential-shaped text in anything shown to a person or saved: ``redact_secrets``.

Error messages, transcripts and tracebacks may quote a server that echoed a key, a URL with a
password, or a header. :func:`redact_secrets` replaces what *looks like* a credential with
``***`` and leaves the rest readable, so a key nbagent never knew about is hidden too.

What is replaced (the secret part only; a header name, ``Bearer`` and the URL stay):

* API keys shaped like OpenAI's and Anthropic's: ``sk-…``, ``sk-proj-…``, ``sk-ant-…`` (at least
  16 key characters after ``sk-``, one of them a digit, so ``sk-learn`` stays);
* ``Bearer <token>`` (a token of 8+ characters holding a digit), and the values of
  ``Authorization``, ``Proxy-Authorization``, ``x-api-key``, ``api-key`` and ``api_key`` written
  as ``name: value`` or ``name=value``, quoted or not (JSON, headers, keyword arguments);
* the ``user:password`` part of a URL (``https://***@host/``);
* common token shapes: GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``,
  ``github_pat_``), Slack (``xoxb-`` …), AWS access key ids (``AKIA…``, ``ASIA…``), Google API
  keys (``AIza…``), Hugging Face (``hf_…``), Groq (``gsk_…``), npm (``npm_…``), Stripe
  (``sk_live_…``, ``rk_test_…``), GitLab (``glpat-…``) and JSON Web Tokens (``eyJ….eyJ….…``).

Also replaced, whatever their shape: the values of the process's credential environment
variables (a name ending in ``API_KEY``, ``_TOKEN``, ``ACCESS_KEY``, ``SECRET_KEY`` or
``_SECRET``, a value of 12 or more characters with no space), so the configured key of an
OpenAI-compatible server that takes any token is hidden too.

Also replaced, exactly: the secrets nbagent itself holds in memory for a while (the OAuth tokens,
authorization codes and client secrets of MCP servers it signed in to), registered with
:func:`hide_exactly` while they live and dropped with :func:`forget_exactly`.

Not replaced, on purpose: bare hex strings (a 40-character git commit or a 64-character sha256
is ordinary text in logs and errors, and no provider issues keys in that bare shape), UUIDs, and
words that merely contain ``key`` or ``token``. Redaction is a safety net, not a guarantee: a
secret with no recognisable shape passes through unless it is in the environment as above (the
provider adapters also replace their own key exactly).

nbagent's own log records (the ``nbagent`` and ``nbagent.providers`` loggers: a failing
callback's traceback, a provider's retry notice) pass through the same replacement, their
tracebacks included, before any handler formats them.

Speed: each rule runs only when a substring test finds its literal (cheap, in C), and most
rules start with that literal so the engine scans for it directly: about 10-15 ms per megabyte
of ordinary text on one core, linear in its length. Importing costs only :mod:`re`.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import traceback

__all__ = ["forget_exactly", "hide_exactly", "hide_in_logs", "redact_secrets"]

MASK = "***"

# (substrings that must occur — in the lower-cased text when ``folded`` — pattern, replacement)
_Rule = tuple[tuple[str, ...], bool, "re.Pattern[str]", str]

_KEY_CHARS = "A-Za-z0-9_-"


def _rule(gates: tuple[str, ...], pattern: str, repl: str = MASK, *, folded: bool = False) -> _Rule:
    flags = re.IGNORECASE if folded else 0
    return (gates, folded, re.compile(pattern, flags), repl)


_RULES: tuple[_Rule, ...] = (
    # user:password@ in a URL (the user name goes too: it is often a token itself)
    _rule(("://",), r"://[^\s/@:'\"<>]{1,256}:[^\s/@'\"<>]{1,256}@", "://" + MASK + "@"),
    # header or keyword values: authorization: …, x-api-key: …, "api_key": "…", api_key=…
    _rule(
        ("authorization", "api-key", "api_key"),
        r"(\b(?:proxy-)?authorization|\bapi[-_]key)(['\"]?\s{0,4}[:=]\s{0,4}['\"]?)"
        r"(?:(?:bearer|basic|token|digest)\s{1,4})?[^\s'\",;}\]]{4,}",
        r"\1\2" + MASK,
        folded=True,
    ),
    _rule(
        ("bearer",),
        r"\b(bearer\s{1,4})(?=[A-Za-z0-9._~+/=-]{0,512}?\d)[A-Za-z0-9._~+/-]{8,}=*",
        r"\1" + MASK,
        folded=True,
    ),
    # The literal comes first so the engine can scan for it; the look-behind after it is the
    # word boundary (``task-1234…`` is not a key).
    _rule(("sk-",), rf"sk-(?<!\wsk-)(?=[{_KEY_CHARS}]{{0,512}}?\d)[{_KEY_CHARS}]{{16,}}"),
    _rule(("gh",), r"gh(?<!\wgh)[pousr]_[A-Za-z0-9]{30,}"),
    _rule(("github_pat_",), r"github_pat_(?<!\wgithub_pat_)[A-Za-z0-9_]{30,}"),
    _rule(("xox",), r"xox(?<!\wxox)[abposre]-[A-Za-z0-9-]{10,}"),
    _rule(("AKIA", "ASIA"), r"A(?<!\wA)[KS]IA[A-Z0-9]{16}\b"),
    _rule(("AIza",), r"AIza(?<!\wAIza)[0-9A-Za-z_-]{35}"),
    _rule(("hf_", "gsk_", "npm_"), r"(?<![A-Za-z0-9])(?:hf|gsk|npm)_[A-Za-z0-9]{30,}"),
    _rule(("_live_", "_test_"), r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    _rule(("glpat-",), rf"glpat-(?<!\wglpat-)[{_KEY_CHARS}]{{20,}}"),
    _rule(
        ("eyJ",),
        rf"eyJ(?<!\weyJ)[{_KEY_CHARS}]{{8,}}\.eyJ[{_KEY_CHARS}]{{8,}}\.[{_KEY_CHARS}]{{8,}}",
    ),
)


_CREDENTIAL_NAME = re.compile(r"(?:API_KEY|_TOKEN|ACCESS_KEY|SECRET_KEY|_SECRET)\Z")
#: Shorter values are too likely to be ordinary words to be replaced wherever they appear.
_MIN_EXACT = 12
_names: tuple[int, list[str]] = (-1, [])


def _environment_secrets() -> list[str]:
    """Values of credential variables in the environment, longest first (names are looked up
    again only when the environment's size changes; values are read every time)."""
    global _names
    size = len(os.environ)
    if _names[0] != size:
        _names = (size, [n for n in os.environ if _CREDENTIAL_NAME.search(n.upper())])
    values = {os.environ.get(n, "").strip() for n in _names[1]}
    found = [v for v in values if len(v) >= _MIN_EXACT and not any(c.isspace() for c in v)]
    return sorted(found, key=len, reverse=True)


#: Secrets held in memory (see :func:`hide_exactly`): in the order they came (the oldest go
#: first past the bound), and longest first for the scan, replaced as a whole tuple so that
#: readers on other threads never see it half-built.
_came: list[str] = []
_held: tuple[str, ...] = ()
_held_lock = threading.Lock()
#: At most this many are kept: a bound, not a budget anyone should meet.
MAX_HELD = 4_096
#: Shorter values could be ordinary words; no token, code or client secret is this short.
MIN_HELD = 8


def hide_exactly(*values: str) -> None:
    """Replace each of ``values`` wherever :func:`redact_secrets` runs, whatever its shape (a
    token nbagent received and holds in memory). Values under 8 characters are ignored."""
    global _came, _held
    fresh = [v for v in values if isinstance(v, str) and len(v) >= MIN_HELD]
    if not fresh:
        return
    with _held_lock:
        _came = ([v for v in _came if v not in fresh] + fresh)[-MAX_HELD:]
        _held = tuple(sorted(_came, key=len, reverse=True))


def forget_exactly(*values: str) -> None:
    """Stop looking for ``values`` (the secrets were forgotten: signed out, server closed)."""
    global _came, _held
    gone = set(values)
    with _held_lock:
        _came = [v for v in _came if v not in gone]
        _held = tuple(sorted(_came, key=len, reverse=True))


def redact_secrets(text: str) -> str:
    """``text`` with every credential-shaped substring replaced by ``***`` (see module docs)."""
    if not text:
        return text
    for secret in _held:
        if secret in text:
            text = text.replace(secret, MASK)
    for secret in _environment_secrets():
        if secret in text:
            text = text.replace(secret, MASK)
    folded: str | None = None
    for gates, fold, pattern, repl in _RULES:
        if fold:
            if folded is None:
                folded = text.lower()
            haystack = folded
        else:
            haystack = text
        if any(gate in haystack for gate in gates):
            text = pattern.sub(repl, text)  # a stale ``folded`` only costs a needless pass
    return text


class _RedactingFilter(logging.Filter):
    """Hides credential-shaped text in a record's message and traceback before any handler
    formats it (a handler writes the traceback a ``log.exception`` call kept, as it is)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the handler reports it as usual
            return True
        hidden = redact_secrets(message)
        if hidden != message:
            record.msg, record.args = hidden, None
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            text = "".join(traceback.format_exception(*record.exc_info))
            record.exc_text = redact_secrets(text.rstrip("\n"))
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True


#: The loggers nbagent writes to (tests/test_redact.py checks that the package uses no other).
LOGGERS = ("nbagent", "nbagent.providers")


def hide_in_logs(*names: str) -> None:
    """Pass the records of the loggers ``names`` through the same replacement (a filter sees
    only its own logger's records, not those of the loggers below it, so name each one)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RedactingFilter) for f in logger.filters):
            logger.addFilter(_RedactingFilter())


hide_in_logs(*LOGGERS)
