"""The loop: one run of an agent, from the model's turn to every call's result.

:mod:`.run` drives the steps; each step's parts have a module of their own: the model's turn
(``_turn``), the batch of calls and the repeat guard (``_callbatch``, ``_repeats``), one call from
hooks to result (``_calls``) with its decision and previews (``_decide``, ``_previews``), running
tools and user code bounded in time (``_execution``, ``_usercode``), step mode's pauses
(``_stepmode``), the end of a run (``_ending``), the event queue and the timeline builder
(``_eventqueue``, ``_timing``), the history each request sends (``_snapshots``). ``_loopstate``
names, as Protocols, what the parts read of one another and of the agent, so that nothing here
imports :mod:`nbagent.agent`.

May import: every room below it (ground, vocabulary, :mod:`nbagent.schema`,
:mod:`nbagent.inspection`, :mod:`nbagent.approvals`, :mod:`nbagent.events`) and
:mod:`nbagent.providers` through its face only. Never batch, the agent or a front end.
"""
