"""The agent works in your kernel: tools that run Python in the notebook's namespace and look at it.

**There is no sandbox.** Code the agent runs has your rights, in your kernel: it can read and
write your files, use the network, and change or delete any variable. Every snippet asks for
approval by default, shows its code before it runs, and can be undone as far as the namespace
goes; for code you would not run yourself, run the notebook in a container or a separate kernel.

:func:`kernel_tools` returns a :class:`KernelToolkit`, a list of three tools:

* ``run_python`` runs a snippet as a cell would (``print`` and stderr, the last expression's
  value, displays, figures, the traceback of an error) on a thread of its own, and reports what
  it changed in the namespace. It needs approval unless told otherwise; Stop, a kernel
  interrupt or the run's cancel interrupt it.
* ``list_variables`` and ``describe_variable`` look without running the agent's code (no
  approval).

Every object in the namespace is the person's code too: nbagent reads types, lengths and shapes
the interpreter keeps, and runs anything else of an object's (a repr, a copy for undo) through
a :class:`~nbagent._ground.guard.Reader`, bounded by ``KernelLimits.read_timeout`` /
``copy_timeout``, stopped with the call, what it raised said as text. A snippet's changes to the
process (the working directory, ``sys.path``, environment variables, imports) are said in its
result.

The toolkit keeps a :class:`~._journal.Journal` of the snippets: :meth:`KernelToolkit.undo`
puts back what a run's snippets changed, :meth:`KernelToolkit.cells` gives their code as cells.
In a notebook: ``%agent --kernel …``, ``%agent undo``, ``%agent cells``.

Inside: the toolkit (``_toolkit``), running a snippet (``_run``, on ``_execute``'s thread,
output caught by ``_capture`` and made a result by ``_present``), the namespace before and after
(``_namespace``, with exact fingerprints from ``_exact*``), what a snippet may not take away
(``_protect``), the journal and undo (``_journal``), looking without running (``_inspect``,
``_objects``), the guard on the person's objects' code (``_guard``), the process's state
(``_process``), the limits (``_limits``) and what the tools say (``_wording``).

May import (docs/architecture.md): the core rooms, ground to events, and the agent; never a
front end.
"""

from __future__ import annotations

from ._journal import Snippet, UndoReport
from ._limits import KernelLimits
from ._toolkit import KernelToolkit, kernel_tools
from ._wording import AUTO_WARNING as AUTO_WARNING  # the notebook's words for --approve auto
from ._wording import RUNNING_NOTE as RUNNING_NOTE

__all__ = [
    "KernelLimits",
    "KernelToolkit",
    "Snippet",
    "UndoReport",
    "kernel_tools",
]
