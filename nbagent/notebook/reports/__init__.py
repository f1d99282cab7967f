"""What a notebook says of its AI use: ``%agent report`` and ``%agent policy``.

:mod:`.runreport` is this notebook's report (its runs and servings, from their records),
:mod:`.classreport` the class report over a course's folders (``%agent report PATH``),
:mod:`.courseview` ``%agent policy``: the policy in force, as the person wrote it.

May import (docs/architecture.md): the shared rooms; never another feature.
"""
