"""Approvals: who decides whether a call may run, and on what grounds.

The approvers and their decisions (:mod:`.approval`), approval rules people read and write
(:mod:`.rules`, with the globs, path spellings and argument kinds they match by: ``_globs``,
``_value_globs``, ``_paths``, ``_rule_kinds``), before- and after-tool hooks (:mod:`.hooks`) and
the checks an edited or rewritten call passes (``_edits``). The loop asks; this room answers.

May import: the ground and the vocabulary (top-level modules), :mod:`nbagent.schema` and
:mod:`nbagent.inspection`. Never the loop, events, providers or a front end (docs/architecture.md).
"""
