"""What every view of a run is made from, live or saved.

:mod:`.transcript` keeps a run as the person saw it, from its events (:mod:`.records` are
its plain values, :mod:`.wording` puts them into words); :mod:`.render` makes escaped HTML,
Markdown and text of results, tables, code and images from plain pieces (:mod:`.values`
reads a person's value into them once, through the guard); :mod:`.exchanges` shows what the
model saw at a step; :mod:`.codefeed` decodes the code inside streaming JSON arguments.
No widget here: model and tool text is never trusted HTML.

May import (docs/architecture.md): nothing else of the notebook.
"""
