"""The live view: the widgets a run streams into while it runs.

:mod:`.view` is a run's view (its text, its cards in order, its pause bar); :mod:`.card` a
call's card with its arguments growing live, :mod:`.approval_bar`, :mod:`.edit_form` and
:mod:`.pause_bar` the person's clicks, :mod:`.proposal` and :mod:`.fold` how notebook-edit
proposals read in a card and fold past fifty, :mod:`.nested` a helper's run in its card,
:mod:`.answerlive` a typed answer as it streams. :mod:`.stream` is the one text widget
(``stream.js``, ``stream.css``, ``plain.js``), :mod:`.presence`, :mod:`.savedform`,
:mod:`.secretline` and :mod:`.cellnote` the small widgets with a script of their own; each
script sits beside the module that sends it (anywidget's ``_esm``). :mod:`.outputs` puts a
view into the cell and replaces it with the saved view when the run ends.

May import (docs/architecture.md): :mod:`..shown`, :mod:`..saved`.
"""
