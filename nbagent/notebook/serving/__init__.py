"""``%agent serve``: the notebook's tools served over MCP, each call a card in the cell.

:mod:`.serve` starts and stops a serving (:class:`~.serve.ServedSession`), :mod:`.servingview`
is its cell (a header, the calls' cards), :mod:`.servedrequests` shows each client request,
:mod:`.connectionline` the line with the token, shown once.

May import (docs/architecture.md): the shared rooms, :mod:`..toolkit` and :mod:`..editing`
(it serves their tools); never another feature.
"""
