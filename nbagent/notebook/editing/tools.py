"""The notebook tools in a session: ``%agent --notebook``, and which document a run works on.

The tools (:mod:`nbagent.document`) enter a run like any tool; this module gives them to runs
that ask for them (``--notebook``: they are opt in, like ``--kernel``), points them at the
notebook open in the page (or, with ``--notebook=NAME``, at a document held by the variable
NAME, such as a :class:`~nbagent.document.NotebookDocument` read from a file), and lets the
session's agent tell the toolkit who accepted each proposal.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ...document import Document, NotebookToolkit
from ..core.registry import offered, withheld

if TYPE_CHECKING:
    from ..core.session import Session
    from .channel import PageDocument

__all__ = [
    "NOTEBOOK_AUTO",
    "NOTEBOOK_TOOLS",
    "page_of",
    "running_cell",
    "running_client",
    "serve_notebook",
    "toolkit",
    "use_notebook",
]

#: What ``--approve auto`` with the notebook tools does, said in the cell.
NOTEBOOK_AUTO = (
    "--approve auto with --notebook: the agent's proposals land in the notebook without your "
    "review (and run_cell runs cells in this kernel); %agent undo takes a run's edits back."
)

#: The notebook tools' names (``%agent --notebook``), known before the toolkit is made.
NOTEBOOK_TOOLS = (
    "read_notebook",
    "read_cell",
    "insert_cell",
    "edit_cell",
    "delete_cell",
    "move_cell",
    "run_cell",
)


#: Each session's page (a session is one per kernel; the page goes with it).
_pages: weakref.WeakKeyDictionary[Session, PageDocument] = weakref.WeakKeyDictionary()
#: The agent each session's toolkit hears (a new conversation may bring a new agent).
_heard: weakref.WeakKeyDictionary[Session, Any] = weakref.WeakKeyDictionary()


def page_of(session: Session) -> PageDocument:
    """The session's page (the notebook open in JupyterLab or Notebook 7), made on first use."""
    found = _pages.get(session)
    if found is None:
        from .channel import PageDocument

        found = _pages[session] = PageDocument()
    return found


def toolkit(session: Session) -> NotebookToolkit:
    """The session's notebook toolkit (on the page; ``run_cell`` through the kernel
    toolkit's journal), made on first use and attached to the session's agent."""
    found: NotebookToolkit | None = session.notebook
    if found is None:
        from ..toolkit.kernelview import toolkit as kernel_toolkit

        kernel = kernel_toolkit(session)
        found = NotebookToolkit(page_of(session), runner=kernel.run_code)
        session.notebook = found
    agent = session.agent
    if _heard.get(session) is not agent:
        found.attach(agent)
        _heard[session] = agent
    return found


def _parent(shell: Any) -> dict[str, Any]:
    """The request of the cell running now (ipykernel keeps it per cell)."""
    kernel = getattr(shell, "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    try:
        parent = get_parent("shell") if callable(get_parent) else None
    except Exception:
        return {}
    return parent if isinstance(parent, dict) else {}


def running_cell(shell: Any) -> str | None:
    """The id of the cell running now, as the front end sent it (JupyterLab and Notebook 7 send
    ``cellId`` with each execution); None when it is not known."""
    metadata = _parent(shell).get("metadata")
    found = metadata.get("cellId") if isinstance(metadata, dict) else None
    return found if isinstance(found, str) and 0 < len(found) <= 64 else None


def running_client(shell: Any) -> str | None:
    """The session id of the kernel client that sent the running cell (its page's)."""
    header = _parent(shell).get("header")
    found = header.get("session") if isinstance(header, dict) else None
    return found if isinstance(found, str) and 0 < len(found) <= 100 else None


def _document(
    session: Session, shell: Any, name: str | None, frontend: Any
) -> tuple[Document, str | None]:
    """The document a run works on: the page, or the one held by the variable ``name``."""
    if name:
        from IPython.core.error import UsageError

        namespace = getattr(shell, "user_ns", {}) or {}
        if name not in namespace:
            raise UsageError(f"--notebook={name}: there is no variable {name!r}")
        found = namespace[name]
        if not isinstance(found, Document):
            raise UsageError(
                f"--notebook={name}: {name} is a {type(found).__name__}, not a notebook document "
                "(nbagent.document.NotebookDocument.from_file(PATH) makes one)"
            )
        return found, None
    from ..core.runner import kernel_loop

    page = page_of(session)
    cell = running_cell(shell)
    page.begin(
        cell,
        reachable=frontend.interactive,
        why=frontend.reason,
        loop=kernel_loop(),
        client=running_client(shell),
    )
    return page, cell


def use_notebook(
    session: Session,
    shell: Any,
    tools: list[str] | None,
    *,
    wanted: bool | str,
    frontend: Any = None,
) -> list[str] | None:
    """The tools of a run: with ``--notebook`` (``wanted``: True, or the name of a variable
    holding a document) the notebook tools as well, pointed at that notebook; without it every
    tool but them (they are opt in)."""
    if wanted:
        served = session.served
        if isinstance(wanted, str) and served is not None and served.running and served.notebook:
            from IPython.core.error import UsageError

            raise UsageError(
                f"--notebook={wanted}: %agent serve --notebook serves this notebook's tools on "
                "its page; stop serving first (%agent serve stop) to work on another document"
            )
        kit = toolkit(session)
        document, protected = _document(
            session, shell, wanted if isinstance(wanted, str) else None, frontend
        )
        kit.use(document, protected=protected)
        return offered(session, kit, tools)
    return withheld(session, session.notebook, tools)


def serve_notebook(session: Session, shell: Any, frontend: Any) -> NotebookToolkit:
    """``%agent serve --notebook``: the notebook tools on the page whose cell serves (its
    cards and approvals are the serving cell's)."""
    kit = toolkit(session)
    document, protected = _document(session, shell, None, frontend)
    kit.use(document, protected=protected)
    return kit
