"""The class report's row: one submitted notebook, and the flags a teacher acts on."""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["COLUMNS", "FLAGS", "NotebookRow"]

#: Each flag's name and what it asks the teacher to look at.
FLAGS: dict[str, str] = {
    "unreadable": "the notebook could not be read (the row says why)",
    "ai_off": "runs in a notebook the course policy marks AI off",
    "other_policy": "runs under another policy than the course's (or none)",
    "output_mismatch": "an output or recording that is not what the run recorded",
    "metadata_removed": "an %agent run whose output carries no nbagent record",
    "metadata_tampered": "an nbagent record that nbagent would not have written",
    "too_large": "more cells or runs than a report reads",
}


@dataclass(frozen=True)
class NotebookRow:
    """One submitted notebook in the class report (see the module for the flags)."""

    student: str
    notebook: str
    runs: int = 0
    live: int = 0
    replayed: int = 0
    offline: int = 0
    refused: int = 0
    #: cells ``%agent cells`` made (their metadata says so), and of those, edited since
    agent_cells: int = 0
    agent_cells_edited: int = 0
    #: cells the agent's accepted proposals made or edited (``%agent --notebook``), and of
    #: those, changed since
    notebook_inserted: int = 0
    notebook_edited: int = 0
    notebook_changed: int = 0
    models: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    #: runs whose price is unknown (not counted in ``cost_usd``)
    unpriced_runs: int = 0
    policy_digests: str = ""
    flags: str = ""
    problems: str = ""
    error: str = ""
    path: str = ""

    @property
    def flag_list(self) -> list[str]:
        return self.flags.split(";") if self.flags else []


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(NotebookRow))
