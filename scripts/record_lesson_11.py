"""Make lesson 11's recording again: the run of its ``%agent --kernel`` cell, played by a scripted
stand-in model (not an LLM), recorded into notebooks/nbagent-recordings/.

    .venv/bin/python scripts/record_lesson_11.py

It runs the lesson's own setup cell in a real kernel started in notebooks/, then the lesson's
``%agent`` cell with ``--record``: the snippets run for real, and the recording holds what the
stand-in said and what they returned. Run it after changing the lesson's prompt, its data or
the kernel tools' descriptions (a replay would no longer find its recording).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "11_the_agent_in_your_kernel.ipynb"

FLAG = """\
by_region = sales.groupby("region")["revenue"]
sales["z"] = (sales["revenue"] - by_region.transform("mean")) / by_region.transform("std")
sales["outlier"] = sales["z"].abs() > 2.5
sales[sales["outlier"]]"""

PLOT = """\
import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(8, 4))
for region, rows in sales.groupby("region"):
    ax.plot(rows["month"], rows["revenue"], marker="o", label=region)
flagged = sales[sales["outlier"]]
ax.scatter(flagged["month"], flagged["revenue"], s=200, facecolors="none",
           edgecolors="red", linewidths=2, label="outlier")
ax.set_ylabel("revenue")
ax.set_title("Monthly revenue by region, outliers circled")
ax.tick_params(axis="x", rotation=45)
ax.legend();"""

ANSWER = (
    "Two months stand out: **East in 2025-07**, with about three times its usual revenue, and "
    "**West in 2025-10**, with about a sixth of it. I added two columns to `sales`: `z` (how "
    "many standard deviations a month is from its region's mean) and `outlier` (more than 2.5), "
    "and plotted the revenue by month with the outliers circled."
)

# Defined in a function, so that the recording kernel's namespace is the student's: the lesson's
# list_variables result is part of what a replay compares.
STAND_IN = f"""
def _stand_in():
    from nbagent.models import Call, ScriptedModel, Text, Turn

    nbagent.notebook.current_session().set_model(ScriptedModel([
        Turn(Text("Let me see what you have.", chunks=4), Call("list_variables", {{}})),
        Turn(Call("describe_variable", {{"name": "sales"}})),
        Turn(Text("I will compare each month with its region's usual revenue.", chunks=6),
             Call("run_python", {{"code": {FLAG!r}, "purpose": "flag the unusual months"}})),
        Turn(Call("run_python", {{"code": {PLOT!r}, "purpose": "plot revenue, outliers circled"}})),
        [Text({ANSWER!r}, chunks=12)],
    ], model="stand-in"))


_stand_in()
del _stand_in
"""


def _cells() -> tuple[str, str]:
    notebook = json.loads(NOTEBOOK.read_text())
    sources = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    setup = next(s for s in sources if "read_csv" in s)
    ask = next(s for s in sources if s.startswith("%agent --kernel"))
    return setup, ask


def _run(client: object, code: str) -> None:
    reply = client.execute_interactive(code, timeout=120, output_hook=_show)  # type: ignore[attr-defined]
    if reply["content"]["status"] != "ok":
        raise SystemExit(f"the cell failed: {reply['content'].get('evalue')}")


def _show(message: dict) -> None:
    if message["msg_type"] == "stream":
        sys.stdout.write(message["content"]["text"])


def main() -> None:
    setup, ask = _cells()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NBAGENT_")}
    env["NBAGENT_RECORDINGS"] = str(ROOT / "notebooks" / "nbagent-recordings")
    env["MPLBACKEND"] = "Agg"
    manager, client = start_new_kernel(cwd=str(NOTEBOOK.parent), env=env)
    try:
        _run(client, setup.replace("if nbagent.notebook.unattended()", "if True"))
        _run(client, STAND_IN)
        _run(client, ask.replace("%agent --kernel", "%agent --kernel --record", 1))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
