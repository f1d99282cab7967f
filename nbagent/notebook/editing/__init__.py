"""The notebook tools' front end: the open page as the document, the proposal card, undo.

:mod:`.channel` reaches the notebook open in JupyterLab or Notebook 7 (``page.js`` in the
page, through the notebook's shared model); :mod:`.tools` gives runs the tools
(``%agent --notebook``; a proposal's card is the live view's, :mod:`..live.proposal`);
:mod:`.undo` is ``%agent undo`` and the Undo button for a run's notebook edits.
The tools themselves, their checks and diffs are :mod:`nbagent.document`'s.

May import (docs/architecture.md): the shared rooms and :mod:`..toolkit` (a cell runs through
the kernel toolkit's journal); never another feature.
"""
