"""API keys: kept secret, cleaned, checked, and sent only to the vendor they belong to.

* :class:`Secret` holds a key so that no ``repr``, ``str``, pickle or copy shows it.
* :func:`clean_api_key` strips surrounding whitespace (a key read from a file keeps its newline)
  and rejects a key with whitespace or control characters inside, or anything but printable
  ASCII: such a key cannot travel in an HTTP header, and the HTTP library's own error would
  quote the header, key and all. The :class:`ConfigurationError` names where the key came from
  and what is wrong with it, never the key.
* :func:`key_vendor` recognises a key as Anthropic's (``sk-ant-…``) or OpenAI's (``sk-proj-…``,
  ``sk-svcacct-…``, ``sk-admin-…``, or a legacy ``sk-…`` key holding OpenAI's ``T3BlbkFJ``
  marker). Other shapes (``sk-…`` keys of DeepSeek or a LiteLLM proxy, ``sk-or-…`` of
  OpenRouter …) belong to no vendor nbagent knows and are not restricted.
* :func:`check_key_destination` refuses to send a recognised key to another vendor.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError

__all__ = [
    "VENDOR_HOSTS",
    "Secret",
    "check_key_destination",
    "clean_api_key",
    "key_vendor",
]

#: The official API host of each vendor whose keys nbagent recognises.
VENDOR_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
_VENDOR_NAMES = {"openai": "OpenAI", "anthropic": "Anthropic"}
_VENDOR_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_OPENAI_PREFIXES = ("sk-proj-", "sk-svcacct-", "sk-admin-")


class Secret:
    """An API key that never shows itself: ``repr`` and ``str`` are ``'***'``."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or ""

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the key replaced by ``***``."""
        if self._value and self._value in text:
            return text.replace(self._value, "***")
        return text

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "'***'" if self._value else "None"

    __str__ = __repr__

    def __reduce__(self) -> Any:  # never pickle a key into a saved object
        raise TypeError("an API key is not picklable")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: Any) -> Secret:
        return self


def _describe_char(char: str) -> str:
    code = ord(char)
    if char in "\r\n":
        return f"a line break (U+{code:04X})"
    if char == "\t":
        return "a tab"
    if char.isspace():
        return f"a space (U+{code:04X})"
    if code < 0x20 or code == 0x7F:
        return f"a control character (U+{code:04X})"
    if 0x80 <= code <= 0x9F:
        return f"a control character (U+{code:04X})"
    return f"a non-ASCII character (U+{code:04X})"


def clean_api_key(value: str | None, source: str) -> str | None:
    """``value`` without surrounding whitespace; None when empty.

    Raises :class:`ConfigurationError` naming ``source`` (a variable's name or ``"the api_key
    argument"``) when the key holds anything but printable ASCII without spaces.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigurationError(
            f"the API key from {source} must be a string, not {type(value).__name__}"
        )
    key = value.strip()
    if not key:
        return None
    for position, char in enumerate(key, 1):
        if not "\x21" <= char <= "\x7e":
            raise ConfigurationError(
                f"the API key from {source} contains {_describe_char(char)} at character "
                f"{position} of {len(key)}: a key is printable ASCII without spaces. Check "
                "that it was copied whole and alone (one key, no quotes or line breaks "
                "inside)"
            )
    return key


def key_vendor(key: str | None) -> str | None:
    """``"anthropic"`` or ``"openai"`` when the key's shape says whose it is, else None."""
    if not key or not key.startswith("sk-"):
        return None
    if key.startswith("sk-ant-"):
        return "anthropic"
    if key.startswith(_OPENAI_PREFIXES) or "T3BlbkFJ" in key:
        return "openai"
    return None


def host_of(url: str | None) -> str:
    """The lower-cased host name of ``url`` ("" when there is none)."""
    from urllib.parse import urlsplit  # on first use: importing the providers stays cheap

    try:
        return (urlsplit(url or "").hostname or "").lower()
    except ValueError:
        return ""


def check_key_destination(
    key: str | None, source: str, destination: str, base_url: str | None
) -> None:
    """Refuse to send a recognised vendor key to another vendor.

    ``destination`` is the vendor the adapter speaks to (``"openai"``, ``"anthropic"``) or
    ``""`` for any other server. A recognised key may go to its own vendor's adapter (through
    any base URL: proxies in front of the vendor are common) or to its vendor's own host
    (Anthropic's OpenAI-compatible endpoint takes Anthropic keys); nowhere else.
    """
    vendor = key_vendor(key)
    if vendor is None or vendor == destination:
        return
    host = host_of(base_url)
    if host == VENDOR_HOSTS[vendor]:
        return
    name = _VENDOR_NAMES[vendor]
    where = _VENDOR_NAMES.get(destination) or f"the server at {host or base_url}"
    fix = (
        f"set {_VENDOR_VARIABLES[destination]} to your {where} key"
        if destination in _VENDOR_VARIABLES
        else "give this server its own key (api_key=... or NBAGENT_API_KEY), or none"
    )
    raise ConfigurationError(
        f"the API key from {source} looks like an {name} key, and nbagent sends an {name} key "
        f"only to {name}, not to {where}: {fix}"
    )
