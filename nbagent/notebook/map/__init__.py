"""``%agent map``: one prompt over the rows of a table, as a batch with a live table.

:mod:`.mapmagic` reads the line, admits it under the course policy and runs the batch;
:mod:`.mapview` is its progress table and the result it leaves.

May import (docs/architecture.md): the shared rooms; never another feature.
"""
