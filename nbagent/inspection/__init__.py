"""Inspection: what the model saw at each step, step mode's pauses, and forks of a run.

:mod:`.exchange` keeps each model request of a run with its answer, :mod:`.stepping` holds step
mode's vocabulary (a pause, the person's resume, the checks on an edited result) and :mod:`.fork`
starts a conversation again from any step and compares two runs. They describe a run; they do
not drive one.

May import: the ground and the vocabulary (top-level modules) and :mod:`nbagent.schema`. Never
approvals, events, the loop or a front end (docs/architecture.md).
"""
