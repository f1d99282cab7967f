"""The bounds of the kernel tools: :class:`KernelLimits`, with their defaults."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KernelLimits"]


@dataclass(frozen=True)
class KernelLimits:
    """Bounds of the kernel tools (defaults in parentheses).

    ``max_output_chars`` (50,000): printed characters kept per snippet, all streams together;
    ``max_displays`` (20) displays kept per snippet; ``max_images`` (8) figures and images sent
    per snippet; ``max_repr_chars`` (10,000) characters of one value or display's text;
    ``copy_budget`` (256 MiB) bytes copied before a snippet, for undo of in-place changes, of
    the objects its code names, and read after it for the exact fingerprints undo checks before
    it puts anything back (a larger object is one undo leaves as it is); ``undo_memory``
    (1 GiB) bytes of such copies kept for all snippets together (the oldest go first);
    ``max_snippets`` (500) snippets remembered; ``read_timeout`` (2 s) one call of an
    object's own code on nbagent's path (its repr, a fingerprint of its attributes, a
    description), after which it is stopped and said; ``copy_timeout`` (30 s) one copy for
    undo (``__deepcopy__`` is the object's code too).
    """

    max_output_chars: int = 50_000
    max_displays: int = 20
    max_images: int = 8
    max_repr_chars: int = 10_000
    copy_budget: int = 256 * 1024 * 1024
    undo_memory: int = 1024 * 1024 * 1024
    max_snippets: int = 500
    read_timeout: float = 2.0
    copy_timeout: float = 30.0
