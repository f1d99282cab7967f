"""The input transformers that let a cell await its run: what they rewrite, and what they leave.

Run in-process with IPython's test shell: the transformers are pure functions of the cell's
text (the kernel tests run the rewritten cells for real).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

CALL = '__import__("nbagent.notebook.magics").notebook.magics.agent_cell'

CASES = {
    # a prompt ending with "?" is a prompt, not a help request
    '%agent Please weather "Oslo", is it warm?': (
        f"await {CALL}('Please weather \"Oslo\", is it warm?')"
    ),
    "%agent what's up?": f'await {CALL}("what\'s up?")',
    "x = %agent -o y is it warm?": f"x = await {CALL}('-o y is it warm?', value=True)",
    "y=%agent  spaced": f"y=await {CALL}('spaced', value=True)",
    "%%agent -o r\nIs it warm?\nyes?": f"await {CALL}('-o r', 'Is it warm?\\nyes?\\n')",
    # code around the magic stays as it is
    "print(1)\n%agent two\nprint(2)": f"print(1)\nawait {CALL}('two')\nprint(2)",
    # after an indented block the line starts with DEDENT tokens: still the top level
    "@tool\ndef f():\n    return 1\n\n%agent go": (
        f"@tool\ndef f():\n    return 1\n\nawait {CALL}('go')"
    ),
    "%agent a \\\n  b c?": f"await {CALL}('a    b c?')",
}

LEFT_ALONE = {
    # inside a function the cell cannot await: the magic runs as a magic
    "def f():\n    %agent inside": "def f():\n    get_ipython().run_line_magic('agent', 'inside')",
    's = """\n%agent in a string\n"""': 's = """\n%agent in a string\n"""',
    "# %agent in a comment": "# %agent in a comment",
    "%agents x": "get_ipython().run_line_magic('agents', 'x')",
}


@pytest.fixture(scope="module")
def shell():  # type: ignore[no-untyped-def]
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "nbagent")
    yield ip
    ip.run_line_magic("unload_ext", "nbagent")


@pytest.mark.parametrize("cell", list(CASES))
def test_agent_lines_become_awaited_calls(shell, cell: str) -> None:  # type: ignore[no-untyped-def]
    assert shell.transform_cell(cell).rstrip("\n") == CASES[cell]


@pytest.mark.parametrize("cell", list(LEFT_ALONE))
def test_what_is_not_a_top_level_agent_line_is_left_alone(shell, cell: str) -> None:  # type: ignore[no-untyped-def]
    assert shell.transform_cell(cell).rstrip("\n") == LEFT_ALONE[cell]


def test_a_spaced_percent_is_not_the_magic(shell) -> None:  # type: ignore[no-untyped-def]
    assert "await" not in shell.transform_cell("% agent x")


def test_help_is_still_help(shell) -> None:  # type: ignore[no-untyped-def]
    assert "pinfo" in shell.transform_cell("%agent?")
    assert "pinfo2" in shell.transform_cell("%agent??")
    assert "pinfo" in shell.transform_cell("%%agent?")


def test_without_autoawait_nothing_is_rewritten(shell) -> None:  # type: ignore[no-untyped-def]
    shell.autoawait = False
    try:
        assert "run_line_magic('agent'" in shell.transform_cell("%agent hi")
        assert "run_cell_magic('agent'" in shell.transform_cell("%%agent\nhi")
    finally:
        shell.autoawait = True


def test_unloading_removes_the_transformers() -> None:
    code = (
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'nbagent')\n"
        "ip.run_line_magic('load_ext', 'nbagent')\n"  # twice: installed once
        "assert 'await' in ip.transform_cell('%agent hi')\n"
        "ip.run_line_magic('unload_ext', 'nbagent')\n"
        "print('AFTER=' + ip.transform_cell('%agent hi').strip())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "AFTER=get_ipython().run_line_magic('agent', 'hi')" in out.stdout
