"""Fixtures: real kernels (the current ipykernel, and ipykernel 6.29 in a venv of its own)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import ipykernel6
from .kernel import Kernel, make_kernel_manager

ROOT = Path(__file__).resolve().parents[2]
IPYKERNEL6 = ipykernel6.VERSION
#: A key that must never appear in any output or saved notebook.
SECRET = "sk-test-SECRET-4f9c2e7d1a"


_RECORDINGS = tempfile.mkdtemp(prefix="nbagent-test-recordings-")


def kernel_env(**extra: str) -> dict[str, str]:
    """The environment of a test kernel: no nbagent settings of the developer's, a fake key."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NBAGENT_", "OPENAI_", "ANTHROPIC_", "JPY_"))
    }
    env["OPENAI_API_KEY"] = SECRET
    # a kernel test never writes recordings into the repository (the kernel's working directory)
    env["NBAGENT_RECORDINGS"] = _RECORDINGS
    env.update(extra)
    return env


@pytest.fixture(scope="session", params=["ipykernel-current", "ipykernel-6.29"])
def kernel_python(request: pytest.FixtureRequest) -> str:
    """The Python a test kernel runs on: this venv's, or one with ipykernel 6.29."""
    if request.param == "ipykernel-current":
        return sys.executable
    if os.environ.get("NBAGENT_TEST_IPYKERNEL6") != "1":
        pytest.skip(
            f"ipykernel {IPYKERNEL6} run skipped: set NBAGENT_TEST_IPYKERNEL6=1 to build a venv "
            "with it (scripts/test does)"
        )
    cache = request.config.cache
    assert cache is not None
    try:
        python = ipykernel6.ensure(Path(cache.mkdir("ipykernel6-venv")))
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"could not build the ipykernel {IPYKERNEL6} venv: {exc}")
    return str(python)


def start_kernel(python: str, spec_dir: Path, env: dict[str, str]) -> Kernel:
    km = make_kernel_manager(python, spec_dir)
    km.start_kernel(env=env)
    return Kernel(km)


@pytest.fixture(scope="module")
def kernel(kernel_python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A kernel with nbagent loaded, shared by the tests of one module."""
    k = start_kernel(kernel_python, tmp_path_factory.mktemp("spec"), kernel_env())
    try:
        k.execute(
            "%load_ext nbagent\nimport nbagent\nimport nbagent.notebook\nfrom nbagent import tool"
        )
        yield k
    finally:
        k.shutdown()


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        if "kernel" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(180))


_COMM_IDS = itertools.count()


class RecordingComm:
    """Stands in for a kernel comm: records what a widget sends, delivers what a browser sends."""

    kernel = "recording"

    def __init__(self, wire: Wire, kwargs: dict[str, Any]) -> None:
        self.wire = wire
        # Unique across tests: ipywidgets keeps every live widget in one dict by this id, and
        # a widget an earlier test left to close late (a preview ending after its test) would
        # otherwise take the entry of this test's widget with the same number with it.
        self.comm_id = kwargs.get("comm_id") or f"comm-{next(_COMM_IDS)}"
        self.handler: Any = None

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.wire.record("msg", self.comm_id, data)

    def on_msg(self, callback: Any) -> None:
        self.handler = callback

    def on_close(self, callback: Any) -> None:
        pass

    def close(self, *args: Any, **kwargs: Any) -> None:
        pass

    def deliver(self, data: dict[str, Any]) -> None:
        """A message from the browser, e.g. a click."""
        self.handler({"content": {"comm_id": self.comm_id, "data": data}, "buffers": []})


class Wire:
    """Every widget message, with its time on ``clock`` and its size as the kernel encodes it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.messages: list[tuple[float, str, str, Any]] = []
        self.comms: dict[str, RecordingComm] = {}

    def clock(self) -> float:
        return self.now

    def create_comm(self, **kwargs: Any) -> RecordingComm:
        comm = RecordingComm(self, kwargs)
        self.comms[comm.comm_id] = comm
        self.record("open", comm.comm_id, kwargs.get("data"))
        return comm

    def record(self, kind: str, comm_id: str, data: Any) -> None:
        self.messages.append((self.now, kind, comm_id, data))

    @staticmethod
    def size(data: Any) -> int:
        # what jupyter_client's packer produces for the message content
        return len(json.dumps(data, ensure_ascii=False, default=str).encode("utf-8"))

    def total_bytes(self, since: int = 0) -> int:
        return sum(self.size(d) for _, _, _, d in self.messages[since:])

    def busiest_second(self, since: int = 0) -> int:
        """The most messages sent within any one second."""
        times = [t for t, _, _, _ in self.messages[since:]]
        best = 0
        start = 0
        for end, t in enumerate(times):
            while t - times[start] >= 1.0:
                start += 1
            best = max(best, end - start + 1)
        return best

    def state(self, comm_id: str) -> dict[str, Any]:
        """A widget's state as a browser would hold it."""
        state: dict[str, Any] = {}
        for _, kind, cid, data in self.messages:
            if cid != comm_id:
                continue
            if kind == "open" or data.get("method") in ("update", "echo_update"):
                state.update(data.get("state", {}))
        return state

    def text(self, comm_id: str) -> str:
        """A TextStream's text rebuilt as the browser does (ASCII offsets)."""
        value = ""
        for _, kind, cid, data in self.messages:
            if cid != comm_id:
                continue
            if kind == "open":
                value = data.get("state", {}).get("value", value)
            elif data.get("method") == "update" and "value" in data.get("state", {}):
                value = data["state"]["value"]
            elif data.get("method") == "custom":
                at, chunk = data["content"]
                assert at == len(value), "a delta that does not line up"
                value += chunk
        return value


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    """Widgets created in this test talk to a recording comm instead of a kernel."""
    import ipywidgets.comm

    recorder = Wire()
    monkeypatch.setattr(ipywidgets.comm, "create_comm", recorder.create_comm)
    return recorder
