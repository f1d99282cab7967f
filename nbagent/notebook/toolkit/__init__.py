"""The kernel toolkit's front end: ``%agent --kernel``, its undo and its cells.

:mod:`.kernelview` hands a run the session's :class:`~nbagent.kernel.KernelToolkit`, shows
``%agent undo`` and the Undo button, and makes a run's snippets into cells (``%agent cells``).

May import (docs/architecture.md): :mod:`..core`, :mod:`..policy` and what they may.
"""
