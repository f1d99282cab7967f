"""``%agent mcp add | list | remove`` in a real kernel, and what ends its servers: remove,
``%unload_ext nbagent``, the kernel's shutdown. Parsing is checked in-process too."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from IPython.core.error import UsageError

from nbagent.notebook import commands, servers

from ..notebook.conftest import kernel_env, start_kernel
from ..notebook.kernel import Kernel
from .conftest import DEMO, ROOT, alive, wait_until

ADD = f"%agent mcp add demo -- {sys.executable} {DEMO} stdio"


def test_which_lines_are_mcp_subcommands() -> None:
    found = commands.find('mcp add fs --env TOKEN -- npx -y "a b" c')
    assert found is not None and found[1] == [
        "add",
        "fs",
        "--env",
        "TOKEN",
        "--",
        "npx",
        "-y",
        "a b",
        "c",
    ]
    assert commands.find("mcp add fs --url http://127.0.0.1:1/mcp") is not None
    assert commands.find("mcp list") is not None and commands.find("mcp remove fs") is not None
    # a line that starts with "mcp" is the subcommand: written wrong, it is its usage
    for line in ("mcp is great", "mcp list my servers", "mcp isn't it", "mcp add", "mcp add fs"):
        with pytest.raises(UsageError, match=r"(?s)nothing was sent.*Usage:\n  %agent mcp add"):
            commands.find(line)
    assert commands.find("-- mcp is great") is None  # after --, a prompt
    with pytest.raises(UsageError, match="check the quotes"):
        commands.find('mcp add fs -- python -c "unclosed')
    assert "%agent mcp list" in servers.USAGE


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    k = start_kernel(
        sys.executable, tmp_path_factory.mktemp("spec"), kernel_env(NBAGENT_MCP_TOKEN="tok-42")
    )
    try:
        k.execute("%load_ext nbagent\nimport nbagent, nbagent.notebook")
        yield k
    finally:
        k.shutdown()


def cell(kernel: Kernel, code: str, **kwargs: Any) -> list[dict[str, Any]]:
    return kernel.execute(textwrap.dedent(code), **kwargs)


def shown(messages: list[dict[str, Any]], mime: str = "text/plain") -> str:
    parts = [
        str(m["content"]["data"].get(mime, ""))
        for m in messages
        if m["msg_type"] in ("display_data", "execute_result")
    ]
    parts += [m["content"]["text"] for m in messages if m["msg_type"] == "stream"]
    return "\n".join(parts)


def server_pid(kernel: Kernel, name: str = "demo") -> int:
    pid = kernel.eval(f"nbagent.notebook.current_session().mcp_servers[{name!r}].pid")
    assert isinstance(pid, int)
    return pid


def test_add_list_run_and_remove_in_a_kernel(kernel: Kernel) -> None:
    added = shown(cell(kernel, ADD + " --noisy"))
    assert "demo__add <- add" in added
    assert "Not registered from demo:" in added and "'/properties/where/$ref'" in added
    markdown = shown(cell(kernel, "%agent mcp list"), "text/markdown")
    assert "| `demo` | running |" in markdown and "`demo__add` ← `add`" in markdown
    assert "demo__add" in shown(cell(kernel, "%agent tools"))
    cell(
        kernel,
        """
        from nbagent.models import ScriptedModel, Call, Turn
        model = ScriptedModel([Turn(Call("demo__add", {"a": 20, "b": 22})), "forty-two"])
        nbagent.notebook.current_session().set_model(model)
        """,
    )
    cell(kernel, "%agent --approve auto add them")
    kernel.wait_for(lambda: kernel.eval("len(model.requests)") == 2, what="the second request")
    assert kernel.eval("model.requests[1].messages[-1].results[0].text") == "42"
    # the server's environment: the kernel's token only when asked for by name
    cell(kernel, f"%agent mcp add envs --env NBAGENT_MCP_TOKEN -- {sys.executable} {DEMO} stdio")
    assert "envs__environment" in kernel.eval("list(nbagent.notebook.current_session().tools)")
    pid = server_pid(kernel)
    removed = shown(cell(kernel, "%agent mcp remove demo"))
    assert "stopped the MCP server 'demo'" in removed
    assert not alive(pid)
    assert "demo__add" not in shown(cell(kernel, "%agent tools"))
    cell(kernel, "%agent mcp remove envs")


def test_a_server_that_cannot_start_is_a_clear_message_and_the_session_goes_on(
    kernel: Kernel,
) -> None:
    messages = cell(kernel, "%agent mcp add nope -- nbagent-no-such-mcp-server", allow_errors=True)
    text = shown(messages) + "".join(
        m["content"].get("evalue", "") for m in messages if m["msg_type"] == "error"
    )
    assert "the command 'nbagent-no-such-mcp-server' was not found" in text
    assert kernel.eval("sorted(nbagent.notebook.current_session().mcp_servers)") == []
    assert kernel.eval("1 + 1") == 2


def test_the_timeouts_of_add_bound_the_silence_and_the_whole_call(kernel: Kernel) -> None:
    progress = Path(__file__).with_name("progress_server.py")
    command = f"-- {sys.executable} {progress} stdio"
    cell(kernel, f"%agent mcp add p --timeout 0.5 --max-timeout 2.5 {command}")
    limits = "nbagent.notebook.current_session().mcp_servers['p']._connection.limits"
    assert kernel.eval(f"({limits}.call_timeout, {limits}.max_call_timeout)") == (0.5, 2.5)
    # a long silence allowed alone: the whole call may take at least as long
    cell(kernel, f"%agent mcp add p --timeout 3600 {command}")
    assert kernel.eval(f"({limits}.call_timeout, {limits}.max_call_timeout)") == (3600, 3600)
    for words, said in (
        ("--timeout 60 --max-timeout 30", "max_call_timeout (30 s) is shorter than call_timeout"),
        ("--max-timeout soon", "--max-timeout needs a positive number of seconds"),
    ):
        messages = cell(kernel, f"%agent mcp add q {words} {command}", allow_errors=True)
        errors = shown(messages) + "".join(
            m["content"].get("evalue", "") for m in messages if m["msg_type"] == "error"
        )
        assert said in errors, errors
    cell(kernel, "%agent mcp remove p")


def test_rerunning_add_restarts_the_server_and_unload_ext_stops_it(kernel: Kernel) -> None:
    cell(kernel, ADD)
    first = server_pid(kernel)
    cell(kernel, ADD)
    second = server_pid(kernel)
    assert second != first and not alive(first)
    cell(kernel, "%unload_ext nbagent")
    assert not alive(second)
    cell(kernel, "%load_ext nbagent")


def test_kernel_shutdown_stops_the_servers(tmp_path: Path) -> None:
    k = start_kernel(sys.executable, tmp_path, kernel_env())
    try:
        k.execute("%load_ext nbagent\nimport nbagent, nbagent.notebook")
        k.execute(ADD)
        pid = server_pid(k)
        assert alive(pid)
        k.kc.shutdown()  # a polite shutdown, as a frontend asks for it
        wait_until(lambda: not k.km.is_alive(), 30, "the kernel to exit")
        wait_until(lambda: not alive(pid), 10, "the MCP server to end")
    finally:
        k.shutdown()


def test_list_says_plainly_how_a_crashed_server_ended(kernel: Kernel) -> None:
    """The status read "exited: exited with code 3; its last output on stderr:" in the table
    and "…stderr::" above the stderr it introduced."""
    cell(kernel, ADD.replace("demo", "brittle", 1))
    cell(
        kernel,
        """
        from nbagent.models import ScriptedModel, Call, Turn
        nbagent.notebook.current_session().set_model(
            ScriptedModel([Turn(Call("brittle__crash", {})), "it crashed"])
        )
        """,
    )
    cell(kernel, "%agent --approve auto crash it")
    markdown = shown(cell(kernel, "%agent mcp list"), "text/markdown")
    assert "| exited with code 3; its last output on stderr |" in markdown, markdown
    assert "**brittle** exited with code 3; its last output on stderr:\n" in markdown, markdown
    assert "exited: exited" not in markdown and "::" not in markdown
    assert "demo server: crashing on purpose" in markdown
    cell(kernel, "%agent mcp remove brittle")


def test_the_how_to_s_example_calls_the_echo_tool_on_the_offline_model(tmp_path: Path) -> None:
    """docs/howto/mcp.md's cells as they read (its server started from the installed copy,
    not downloaded by `npx -y`), in a kernel with no key (the offline model), and Approve
    clicked as its reader would. `everything__echo` is named by its short name, "Echo"."""
    from .conftest import everything_command

    binary = everything_command()[0]
    howto = (ROOT / "docs" / "howto" / "mcp.md").read_text(encoding="utf-8")
    block = howto.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    add = next(line for line in block if line.startswith("%agent mcp add everything --"))
    ask = next(line for line in block if line.startswith("%agent Echo"))
    assert ask == '%agent Echo "hello" with the everything server'
    k = start_kernel(sys.executable, tmp_path, kernel_env(NBAGENT_MODEL="offline"))
    try:
        k.execute("%load_ext nbagent\nimport nbagent.notebook")
        k.execute(add.replace("npx -y @modelcontextprotocol/server-everything", binary))
        since = k.mark()
        asked = k.submit(ask)
        approve = k.wait_for(lambda: k.buttons("Approve", enabled=True, since=since))
        k.click(approve[0])
        k.finish(asked, allow_errors=True)

        def ended() -> str | None:
            text = k.cell_text(asked)
            return text if "finished ·" in text else None

        text = k.wait_for(ended, what="the run's end")
        assert '[tool] everything__echo {"message": "hello"}' in text, text
        assert "→ Echo: hello" in text, text
    finally:
        k.shutdown()
