"""The command language: how an ``%agent`` line is written and read.

:mod:`.grammar` declares every subcommand (its forms, its usage line, its parser), so the
usage, the help and the parser agree; :mod:`.options` reads a run's options and fills a
prompt's ``{name}`` fields; :mod:`.helptext` is ``%agent help``; :mod:`.outputtype` reads
``--output``; :mod:`.cells` rewrites an ``%agent`` cell so that it awaits its run. Words and
parsing only: nothing here shows a run or knows a session.

May import (docs/architecture.md): nothing else of the notebook.
"""
