"""The text of ``%agent help`` (and ``%agent?``): one place for every subcommand and option,
read by the magics and by the ``help`` subcommand alike."""

from __future__ import annotations

from .grammar import SUBCOMMANDS_HELP

__all__ = ["HELP", "MAP_HELP"]


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


MAP_HELP = """\
  map: TABLE is a DataFrame (or a list of prompts), and the template's {fields} name its
  columns. Its options: --approve auto|deny (default deny), --concurrency N, --timeout
  SECONDS, --max-steps N, --schema NAME (a JSON Schema or type: the output column),
  --checkpoint PATH (resumes when it exists), --resume NAME (an earlier results table),
  --engine NAME (a dask.distributed.Client), -m MODEL, --tools A,B
"""

HELP = """\
Ask the agent; the answer streams into the cell.

  %agent [options] PROMPT        one line; {name} is replaced by the variable's value
  x = %agent [options] PROMPT    the same, and x gets the run's result (a RunResult)
  %%agent [options]              the cell body is the prompt
  %agent [options] -- PROMPT     a prompt that starts with a dash or a subcommand's name

Subcommands: a line whose first word is one of these is that subcommand, never a prompt; one
written in none of its forms is answered with its usage, and nothing is sent to the model. To
ask the model something that starts with such a word, put -- first (%agent -- compare these two
files), or write it in the body of a %%agent cell.
{subcommands}
{map_help}
Options
  -m, --model MODEL    the model from now on: offline, openai:MODEL, openai-responses:MODEL,
                       anthropic:MODEL, ollama:MODEL, openai-compatible:MODEL, local:smollm2
                       (in this kernel)
  -o NAME              keep the run's result in the variable NAME
  --output TYPE        answer with a value of this type: a name in the notebook (a
                       dataclass, TypedDict, pydantic model, a JSON Schema dict) or a type
                       such as list[str]; the value is the result's .output, shown as a
                       table or JSON
  --new, --reset       start a new conversation (approval rules stay: see %agent rules);
                       `%agent --new` alone only does that, `%agent -m MODEL` alone only
                       sets the model
  --continue [RUN]     after a kernel restart: go on with the saved notebook's latest
                       conversation (or run RUN's), rebuilt from its record and recording;
                       alone it only does that (or asks again a call left waiting for
                       approval), with a prompt it asks it next
  --approve POLICY     ask, auto or deny: how calls that need approval are decided in this run
  --max-steps N        stop after N model turns
  --budget TOKENS      stop before a model turn once the run used this many tokens
  --tools A,B          only these tools in this run
  --step               step through the run: it pauses before each model request and each
                       batch of calls (Next, Run to end, Stop; edit what the model reads next)
  --kernel             let the agent run Python in this kernel (run_python, list_variables,
                       describe_variable): it asks before each snippet; %agent undo puts
                       back what the snippets changed, %agent cells turns them into cells.
                       There is no sandbox: the code has your rights.
  --notebook           let the agent read this notebook and propose edits of its cells
                       (read_notebook, read_cell, insert_cell, edit_cell, delete_cell,
                       move_cell, run_cell): each change is a card with its diff, Accept or
                       Reject; %agent undo takes a run's edits back. --notebook=NAME: the
                       document the variable NAME holds (nbagent.document.NotebookDocument)
  --acp NAME           ask the external agent NAME over ACP (claude, codex, gemini, opencode,
                       or one of %agent acp add): its own loop and model, nbagent's cards
                       and approvals; the next --acp NAME cell goes on with the same
                       conversation, --new starts another
  --record             run live and record the run (beside the notebook, in nbagent-recordings/)
  --replay             replay this run's recording (with a model set: go on live where the run
                       departs from it, and record again)
  --live               run live, neither replaying nor recording
  --pace PACE          how a replay streams: instant, readable (default with widgets), recorded
  --                   end of the options: what follows is the prompt, even when it starts
                       with a dash or a subcommand's name

Tools are the @nbagent.tool functions defined in the notebook, and nbagent.register(...).

The cell ends when the run ends, so Run All goes cell by cell and -o NAME is set before the next
cell runs; Approve, Deny and Stop work while the cell waits, and Kernel > Interrupt stops the
run. This needs ipykernel 7.4 or newer; on older kernels a run that may ask for approval goes on
in the background (the cell says so) and NAME holds a pending result until the run ends.
Unattended runs (nbclient, CI) deny calls that need approval unless --approve or
NBAGENT_APPROVAL says auto.

Recordings: with no model set (the offline stand-in), a run that has a recording replays it;
with a real model set (-m, NBAGENT_MODEL), every run is recorded afresh. %agent recording lists
the recordings.

MCP servers: %agent mcp add NAME -- COMMAND ARGS starts a server (--url URL connects to one;
--env VAR passes the kernel's VAR to it); its tools become NAME__tool and ask for approval.
A server at a URL that asks you to sign in shows a sign-in link in the cell (OAuth); or pass a
token with --header 'Authorization: Bearer $VAR' (read from the kernel's environment).

A course policy (nbagent-course.toml beside the notebook or in a folder above it, or the file
NBAGENT_COURSE_POLICY names) may limit models, live calls, the kernel and notebook tools, MCP
servers, --approve auto and spending, or turn AI off: a run it refuses says which rule of which
file, and nothing is sent. %agent policy shows what is in force.

Approval rules decide before anyone is asked: %agent allow write_file path=data/* (a glob on a
named argument; * stays in one folder), %agent deny delete_file; deny rules win, then allow
rules, then the run's policy. "Always allow" on a card adds "allow TOOL". %agent rules lists
them, %agent rules remove N|TOOL or %agent rules clear removes them. On a card, Edit changes a
call's arguments before approving (checked against the tool's schema; the model is told).
A model that makes the same call with the same result more than 3 times in a row is asked
about (Go on / Stop; stopped when nobody can click): %agent allow repeats TOOL lets it repeat.
"""


HELP = HELP.replace("{subcommands}", _indent(SUBCOMMANDS_HELP)).replace("{map_help}", MAP_HELP)
