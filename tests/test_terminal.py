"""The terminal front end drives the same loop and asks for approval at a prompt."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str, stdin: str = "") -> str:
    out = subprocess.run(
        [sys.executable, "-m", "nbagent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin", "NBAGENT_MODEL": "offline"},
    )
    return out.stdout


def test_offline_tool_call_and_answer() -> None:
    out = run_cli("add 2 and 3")
    assert "→ add(" in out and "2.0 + 3.0 = 5.0" in out and "[finished; 2 steps" in out


def test_approval_prompt_approves_and_denies() -> None:
    yes = run_cli('delete_file "notes.txt"', stdin="y\n")
    assert "Approve delete_file" in yes and "(pretend) deleted notes.txt" in yes
    no = run_cli('delete_file "notes.txt"', stdin="keep it\n")
    assert (
        "[denied: keep it]" in no
        and "deleted notes.txt" not in no.split("[denied")[1].split("\n")[0]
    )
    assert "denied this call to delete_file: keep it" in no
