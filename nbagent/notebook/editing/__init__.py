"""The notebook tools' front end: the open page as the document, the proposal card, undo.

:mod:`.channel` reaches the notebook open in JupyterLab or Notebook 7 (``page.js`` in the
page, through the notebook's shared model); :mod:`.tools` gives runs the tools
(``%agent --notebook``); :mod:`.card` is how a proposal's approval bar reads (Accept, Reject,
Accept all); :mod:`.undo` is ``%agent undo`` and the Undo button for a run's notebook edits.
The tools themselves, their checks and diffs are :mod:`nbagent.document`'s.

May import (docs/architecture.md): what :mod:`nbagent.notebook` may.
"""
