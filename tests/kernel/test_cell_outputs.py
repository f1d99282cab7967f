"""A snippet's outputs as a notebook cell's (``run_cell``): streams, its value, its error (the
displays of a real kernel: tests/notebook/test_kernel_notebook.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from nbagent import kernel_tools
from nbagent.tools import ToolCall, ToolContext

SECRET = "sk-test-SECRET-4f9c2e7d1a00112233"


def _run(code: str, namespace: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    kit = kernel_tools(namespace)
    tool = kit[0]
    outputs: list[dict[str, Any]] = []

    async def go() -> Any:
        context = ToolContext(ToolCall("c1", "run_cell"), {"cell_id": "x"}, tool, run_id="run-1")
        return await kit.run_code(context, code, "cell 1", cell_outputs=outputs)

    return asyncio.run(go()), outputs


def test_streams_displays_and_the_value_become_outputs_in_order() -> None:
    ns: dict[str, Any] = {}
    code = f"import sys\nprint('one')\nprint('two', file=sys.stderr)\nprint('{SECRET}')\n6 * 7"
    result, outputs = _run(code, ns)
    assert not result.is_error
    kinds = [(o["output_type"], o.get("name")) for o in outputs]
    assert kinds == [
        ("stream", "stdout"),
        ("stream", "stderr"),
        ("stream", "stdout"),
        ("execute_result", None),
    ]
    assert outputs[0]["text"] == "one\n" and outputs[1]["text"] == "two\n"
    assert SECRET not in str(outputs)  # a saved notebook keeps them
    assert outputs[-1]["data"]["text/plain"] == "42" and outputs[-1]["execution_count"] is None
    assert "sys" in ns  # it ran in the namespace, journaled like run_python


def test_an_error_is_an_error_output_with_its_traceback() -> None:
    result, outputs = _run("x = 1\nprint(totl)", {})
    assert result.is_error
    [error] = outputs
    assert error["output_type"] == "error" and error["ename"] == "NameError"
    assert "totl" in error["evalue"] and any("totl" in line for line in error["traceback"])
