"""``%agent --acp NAME``: an external agent (Claude Code, Codex, Gemini CLI, OpenCode, your own)
in the cell over the Agent Client Protocol, with nbagent's cards, approvals and rules.

:mod:`.agents` holds the session's agents (``%agent acp``, ``add``, ``remove``, ``stop``;
:func:`nbagent.notebook.register_agent` from Python) and its conversation with each;
:mod:`.acprun` plans one prompt as a run of the shared runner, under the course policy.

May import (docs/architecture.md): the shared rooms; never another feature.
"""

from __future__ import annotations

__all__: list[str] = []
