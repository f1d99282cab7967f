"""``%agent serve`` recorded like a run, with nobody to click, and exposed, in a real kernel:
``%agent report`` lists what the external agent asked and what it got; the serving cell's
final output carries a ``served`` provenance record that a saved notebook (and the class
report's reader) reads back; where no widget can show, a call that needs approval is denied
with the reason and nothing runs; ``--expose`` says once what it exposes.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent.course import notebook_report
from nbagent.course.provenance import from_metadata, read_output

from .kernel import Kernel
from .test_kernel_serve import Background, start_serving, stop_serving

SECRET = "sk-abcdefghijklmnopqrstuvwxyz0123456789"


def _stream(messages: list[dict]) -> str:  # type: ignore[type-arg]
    return "".join(m["content"].get("text", "") for m in messages if m["msg_type"] == "stream")


def _report_output(kernel: Kernel) -> tuple[str, dict]:  # type: ignore[type-arg]
    report = kernel.submit("%agent report")
    kernel.finish(report)
    (output,) = [o for o in kernel.cell_outputs(report) if o["output_type"] == "display_data"]
    return report, output["data"]


def test_report_lists_the_served_calls_and_the_serving_cell_carries_their_record(
    kernel: Kernel, tmp_path: Path
) -> None:
    since = kernel.mark()
    url, headers, serving = start_serving(kernel)
    asked = f"<script>{SECRET}</script>.txt"
    try:
        client = Background(url, headers, "delete_file", {"path": asked})
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        kernel.click(approve[0])
        kernel.wait_for(client.done, what="the approved call's answer")
        assert client.error is None, client.error
        later = kernel.mark()
        denied = Background(url, headers, "delete_file", {"path": "keep.txt"})
        deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=later))
        kernel.click(deny[0])
        kernel.wait_for(denied.done, what="the denied call's answer")
        assert denied.result.is_error
        # while it serves, the report shows the calls so far
        _id, live = _report_output(kernel)
        assert "served over MCP" in live["text/plain"] and "keep.txt" in live["text/plain"]
    finally:
        stop_serving(kernel)
    run_id = kernel.eval("nbagent.notebook.current_session().served_sessions[-1].calls.id")
    report, data = _report_output(kernel)
    plain, shown = data["text/plain"], data["text/html"]
    for text in (plain, shown):
        assert run_id in text
        assert "served over MCP (%agent serve)" in text
        assert "delete_file" in text and "approved" in text and "denied" in text
        assert "keep.txt" in text  # what it asked
        assert SECRET not in text  # … redacted
    assert "asked " in plain and "got deleted" in plain  # what it got
    assert "<script" not in shown and html.escape("<script>") in shown  # never trusted HTML
    assert "<th>asked</th>" in shown and "<th>got</th>" in shown

    # the serving cell's final output carries the record, read back strictly
    records = [read_output(o.get("metadata")) for o in kernel.cell_outputs(serving)]
    (record,) = [r for r in records if r is not None]
    assert record.mode == "served" and record.run_id == run_id  # type: ignore[union-attr]
    calls = record.calls  # type: ignore[union-attr]
    assert [(c.tool, c.decision, c.status) for c in calls] == [
        ("delete_file", "approved", "done"),
        ("delete_file", "denied", "denied"),
    ]
    assert calls[0].arguments is not None and SECRET not in calls[0].arguments
    assert calls[0].result is not None and calls[0].result.startswith("deleted")
    assert "keep.txt" in (calls[1].arguments or "")
    assert SECRET not in json.dumps(kernel.cell_outputs(serving))

    # a saved notebook: the saved-notebook report (the class report's scanner) reads it
    nb = nbformat.v4.new_notebook()
    for source, msg_id in (("%agent serve", serving), ("%agent report", report)):
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.from_dict(o) for o in kernel.cell_outputs(msg_id)]
        nb.cells.append(cell)
    nbformat.validate(nb)
    path = tmp_path / "served.ipynb"
    nbformat.write(nb, str(path))
    saved = notebook_report(path)
    assert saved.error is None, saved.error
    assert [r.run_id for r in saved.runs] == [run_id]
    assert saved.runs[0].mode == "served" and len(saved.runs[0].calls) == 2
    assert "1 served (%agent serve)" in str(saved)


def test_a_record_with_a_served_call_that_lacks_its_result_is_refused() -> None:
    """The strict reader: a served call has both ``arguments`` and ``result``, or neither."""
    from nbagent.course.provenance import CallRecord, Provenance, ProvenanceError

    good = Provenance(
        "serve-9",
        "tool calls",
        None,
        None,
        "served",
        calls=(CallRecord("f", "approved", "ok", '{"a": 1}', "done"),),
    ).to_metadata()
    assert from_metadata(good).calls[0].arguments == '{"a": 1}'
    del good["calls"][0]["result"]
    with pytest.raises(ProvenanceError, match=r"calls\[0\]"):
        from_metadata(good)
    good["calls"][0]["result"] = "x" * 301
    with pytest.raises(ProvenanceError, match=r"calls\[0\]\.result"):
        from_metadata(good)


def test_with_no_widgets_a_call_that_needs_approval_is_denied_and_nothing_runs(
    kernel: Kernel,
) -> None:
    kernel.execute(
        "import os as _os\n_os.environ['NBAGENT_MODE'] = 'headless'\n"
        "looked = []\n"
        "@tool\n"
        "def look(what: str) -> str:\n"
        "    '''Look at something (no approval needed).'''\n"
        "    looked.append(what)\n"
        "    return f'saw {what}'\n"
    )
    try:
        url, headers, serving = start_serving(kernel)
        try:
            said = kernel.cell_text(serving)
            assert "it is never printed" in said  # the text view: no widget, no token shown
            assert headers["Authorization"].split()[1] not in json.dumps(
                kernel.cell_outputs(serving)
            )
            client = Background(url, headers, "delete_file", {"path": "c.txt"})
            kernel.wait_for(client.done, what="the refused call's answer")
            assert client.error is None, client.error
            assert client.result.is_error
            assert "nobody can approve calls here" in client.result.text
            assert kernel.eval("ran") == []
            fine = Background(url, headers, "look", {"what": "the sky"})
            kernel.wait_for(fine.done, what="the unapproved tool's answer")
            assert fine.error is None, fine.error
            assert fine.result.text == "saw the sky"
            assert kernel.eval("looked") == ["the sky"]
            # the serving cell says how calls are decided here
            assert "calls that ask are denied (nobody can click here)" in said, said
            assert "as in a run" not in said
        finally:
            stop_serving(kernel)
    finally:
        kernel.execute(
            "_os.environ.pop('NBAGENT_MODE', None)\n"
            "nbagent.notebook.current_session().unregister('look')"
        )


def test_expose_says_once_what_it_exposes_and_serves_over_loopback_too(kernel: Kernel) -> None:
    """``--expose 0.0.0.0`` (every address; the test talks over loopback only, and stops at
    once): the serving cell says what that exposes, once; ``%agent serve`` again does not."""
    url, headers, serving = start_serving(kernel, "--expose 0.0.0.0 --kernel")
    try:
        said = kernel.cell_text(serving)
        assert said.count("not only on this machine") == 1
        assert "run code in this kernel (run_python)" in said
        assert url.startswith("http://0.0.0.0:")
        again = _stream(kernel.execute("%agent serve"))
        assert "not only on this machine" not in again
        loopback = url.replace("0.0.0.0", "127.0.0.1", 1)
        client = Background(loopback, headers, "list_variables", {})
        kernel.wait_for(client.done, what="the read-only kernel tool's answer")
        assert client.error is None, client.error
        assert not client.result.is_error
    finally:
        stop_serving(kernel)
    since = kernel.mark()
    plain = _stream(kernel.execute("%agent serve"))  # a new serve on loopback: no such note
    try:
        assert "not only on this machine" not in plain
        header = [t for t in kernel.html_texts(since) if "Serving over MCP at" in t]
        assert header and "http://127.0.0.1:" in header[0]  # the card's header says where
    finally:
        stop_serving(kernel)
