"""The ground room's private helpers, which every room may use and which import nothing else of
nbagent: an extra's install line (:mod:`.extras`), a file a person named opened safely
(:mod:`.files`), the person's code called bounded in time (:mod:`.guard`) and their objects
formatted bounded in time and size (:mod:`.formatting`), text shown as written in Markdown
(:mod:`.markdown`), a budget as one account a run tree spends from (:mod:`.spending`), text
grown from fragments (:mod:`.textbuf`), a coroutine run from blocking code (:mod:`.threads`).

May import (docs/architecture.md): nothing.
"""
