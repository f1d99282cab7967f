"""The notebook's session: what every ``%agent`` line and every feature works through.

:mod:`.session` is the kernel's one :class:`~.session.Session` (its tools, model, rules,
MCP servers, runs), :mod:`.runner` drives a run on the kernel's loop into a view,
:mod:`.recordings` keeps and finds the notebook's recordings, :mod:`.frontend` tells what
can show and click here (JupyterLab, nbclient …) and which approver that gives,
:mod:`.notebookfile` which notebook file the kernel runs, and :mod:`.continuation` rebuilds a
conversation from the saved notebook after a restart (``%agent --continue``).

May import (docs/architecture.md): :mod:`..shown`, :mod:`..saved`, :mod:`..live`.
"""
