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
import time
from collections.abc import Iterator
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


def wait_until(check: Any, timeout: float = 10.0, what: str = "") -> None:
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
def http_server(command: list[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """Run an HTTP MCP server (``command`` ends with its port) on 127.0.0.1; yield its URL."""
    port = free_port()
    process = subprocess.Popen(
        [*command, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
            except OSError:
                return False
            return True

        wait_until(listening, 30, f"{command[-1]} to listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


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
