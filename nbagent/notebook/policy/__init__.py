"""The course policy on this kernel's session, and the records it leaves.

:mod:`.coursegate` finds and reads the policy in force and judges a run by it;
:mod:`.requestgate` is the gate every model request of the session passes (installed on the
request path, so every route is governed); :mod:`.courseadmit` admits a planned run, map or
serving before anything shows; :mod:`.coursereach` says what a model object would reach;
:mod:`.courserecord` and :mod:`.servedrecord` write the provenance a run's and a serving's
output carry.

May import (docs/architecture.md): :mod:`..core` and what it may.
"""
