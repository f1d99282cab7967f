"""The notebook tools' one error: no notebook can be read or changed here."""

from __future__ import annotations

from ..errors import NbagentError

__all__ = ["NotebookUnavailableError"]


class NotebookUnavailableError(NbagentError):
    """No notebook can be read or changed here (no page holds it, it stopped answering, its
    answer was not understood): ``str()`` is one sentence saying which, and that nothing was
    changed."""
