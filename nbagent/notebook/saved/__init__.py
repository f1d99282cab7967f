"""The saved view: a run as static outputs that a notebook keeps and any page reads.

:mod:`.static` turns a transcript into nbformat outputs (HTML, Markdown, plain text, and the
run's record in their metadata), :mod:`.static_nested` a helper's run inside its call,
:mod:`.answerview` a typed answer, and :mod:`.textview` is the view for a cell where no
widget can show (nbclient, papermill, a terminal-like frontend), which writes them directly.

May import (docs/architecture.md): :mod:`..shown`.
"""
