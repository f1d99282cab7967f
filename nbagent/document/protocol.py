"""What a notebook front end implements for the notebook tools: a :class:`Document`.

A document is the notebook as the person has it open: the tools read its cells and hand it
changes that the person accepted. Two implement it: the open page in JupyterLab or Notebook 7
(:mod:`nbagent.notebook.editing`, through the notebook's shared model in the page), and
:class:`~.memory.NotebookDocument`, a notebook held in memory (a file read on purpose, a
test, a lesson run headless). Every change carries what it expects to find (the source the
model read), and a document applies a change only when that holds, in one step of its own:
a person's edit made meanwhile always wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._errors import NotebookUnavailableError

if TYPE_CHECKING:
    from .cells import Snapshot
    from .changes import Applied, Change
    from .limits import NotebookLimits

__all__ = ["Document", "NotebookUnavailableError"]


@runtime_checkable
class Document(Protocol):
    """A notebook the tools read and change (see the module)."""

    @property
    def name(self) -> str:
        """How the person knows it (its path, or "this notebook")."""
        ...

    async def read(self, ids: Sequence[str] | None, limits: NotebookLimits) -> Snapshot:
        """The cells (``ids``: those, in the notebook's order; None: all, up to
        ``limits.max_cells``), each source and output bounded as ``limits`` say. Raises
        :class:`NotebookUnavailableError`."""
        ...

    async def apply(
        self, changes: Sequence[Change], limits: NotebookLimits, *, together: bool = False
    ) -> list[Applied]:
        """Apply each change whose expectation holds (the others are refused, saying why),
        in the notebook's own order; ``together``: as one step of its undo history. Raises
        :class:`NotebookUnavailableError` when nothing could be asked (then nothing changed)."""
        ...
