"""Real MCP servers for the tests: the SDK-written demo server (stdio and streamable HTTP) and
the npm reference server, started the way a person would start them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(Path(__file__).with_name("demo_server.py"))
RAW = str(Path(__file__).with_name("raw_server.py"))
RAW_HTTP = str(Path(__file__).with_name("raw_http_server.py"))
NODE_BIN = ROOT / ".venv" / "node" / "node_modules" / ".bin"
EVERYTHING = NODE_BIN / "mcp-server-everything"
FILESYSTEM = NODE_BIN / "mcp-server-filesystem"

#: How long a server process may take to answer (a bound for a hang: a loaded machine starts
#: a Python server with the SDK in seconds, sometimes tens of them).
SERVER_START = 120.0

NO_SDK = "the mcp SDK is not installed (scripts/test installs the extra: pip install -e '.[mcp]')"


def demo_command(*extra: str) -> list[str]:
    """The demo server over stdio."""
    return [sys.executable, DEMO, "stdio", *extra]


def everything_command() -> list[str]:
    """The reference server over stdio, or a skip saying why it cannot run here."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed, so the reference MCP server cannot run")
    override = os.environ.get("NBAGENT_MCP_EVERYTHING")
    program = Path(override) if override else EVERYTHING
    if not program.exists():
        reason = (
            f"the reference MCP server is not installed at {program} (scripts/test installs it "
            "with npm; NBAGENT_MCP_EVERYTHING may point at another copy)"
        )
        pytest.skip(reason)
    return [str(program), "stdio"]


def filesystem_command(*roots: str) -> list[str]:
    """The npm filesystem server over stdio, serving ``roots``, or a skip saying why not."""
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed, so the filesystem MCP server cannot run")
    if not FILESYSTEM.exists():
        pytest.skip(
            f"the filesystem MCP server is not installed at {FILESYSTEM} (scripts/test installs "
            "it with npm)"
        )
    return [str(FILESYSTEM), *roots]


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (an unreaped zombie counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


#: How long a test waits for something that must happen before it fails: a bound for a hang,
#: never a speed check (a loaded machine only makes the wait longer).
PATIENCE = 60.0


def wait_until(check: Any, timeout: float = PATIENCE, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


def call(tool: Any, arguments: dict[str, Any], updates: list[Any] | None = None) -> Any:
    """Run one tool's execute as the loop does, on a fresh event loop; return its result."""
    from nbagent.tools import ToolCall, ToolContext

    context = ToolContext(
        ToolCall("call-1", tool.name, "{}"),
        arguments,
        tool,
        emit=updates.append if updates is not None else None,
    )
    return asyncio.run(tool.execute(context))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextlib.contextmanager
def on_a_free_port(
    command: Callable[[int], list[str]],
    answering: Callable[[int, int], bool],
    what: str,
    env: dict[str, str] | None = None,
) -> Iterator[int]:
    """Run ``command(port)`` on a free port of 127.0.0.1 until ``answering(port, pid)``;
    yield the port. A port free when chosen may be taken by another process of this machine
    before the server binds it: a server that exits before it answers is started again on
    another port (three times at most); one that neither answers nor exits fails the test,
    saying so."""
    for attempt in range(3):
        port = free_port()
        with tempfile.TemporaryFile() as stderr:
            process = subprocess.Popen(
                command(port),
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, **(env or {})},
            )
            try:
                wait_until(
                    lambda p=process, n=port: p.poll() is not None or answering(n, p.pid),
                    SERVER_START,
                    f"{what} to answer on port {port}",
                )
                if process.poll() is None:
                    yield port
                    return
                stderr.seek(0)
                said = stderr.read()[-2000:].decode(errors="replace")
                if attempt == 2 or "address already in use" not in said.lower():
                    raise AssertionError(f"{what} exited with {process.returncode}:\n{said}")
            finally:
                process.kill()
                process.wait()


def listening(port: int, _pid: int = 0) -> bool:
    """Whether something accepts connections on ``port`` of 127.0.0.1."""
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def http_server(command: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """Run an HTTP MCP server (``command`` ends with its port) on 127.0.0.1; yield its URL."""
    with on_a_free_port(lambda port: [*command, str(port)], listening, command[-1], env) as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def http_demo() -> Iterator[str]:
    """The demo server over streamable HTTP on 127.0.0.1; yields its URL."""
    with http_server([sys.executable, DEMO, "http"]) as url:
        yield url


@pytest.fixture(scope="module")
def demo() -> Iterator[Any]:
    """One demo server over stdio, shared by the tests that leave it running."""
    from nbagent.mcp import mcp_server

    server = mcp_server("demo", demo_command())
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def everything() -> Iterator[Any]:
    """The reference server over stdio."""
    from nbagent.mcp import mcp_server

    server = mcp_server("everything", everything_command())
    try:
        yield server
    finally:
        server.close()


def by_name(server: Any, name: str) -> Any:
    found = {t.name: t for t in server.tools}
    assert name in found, f"{name} not in {sorted(found)}"
    return found[name]
