"""A real kernel driven the way a frontend drives it: execute cells, read iopub, click widgets.

The harness keeps every iopub message, folds widget comm messages into per-widget state (as the
browser's widget manager would), and sends clicks as the shell ``comm_msg`` a browser sends.
"""

from __future__ import annotations

import ast
import atexit
import itertools
import json
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_client import AsyncKernelManager, KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from traitlets import default

WIDGET_TARGET = "jupyter.widget"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

#: Where this test process's kernels keep their sockets (one folder, gone when it exits).
_SOCKETS = tempfile.mkdtemp(prefix="nbagent-kernels-")
atexit.register(shutil.rmtree, _SOCKETS, ignore_errors=True)
_NUMBERS = itertools.count()


def _socket_prefix() -> str:
    return os.path.join(_SOCKETS, f"k{next(_NUMBERS)}")


class LocalKernelManager(KernelManager):
    """A kernel manager whose kernel listens on Unix sockets of its own (ZMQ's ``ipc``
    transport) rather than TCP ports. jupyter_client chooses a TCP kernel's five ports free,
    then closes them for the kernel to bind a moment later: on a machine where other suites
    start kernels and open connections meanwhile, one of them can take a port in between, and
    the kernel dies with "Address already in use" before it answers. A socket path in this
    process's own folder cannot be taken by anyone else."""

    @default("transport")
    def _local_transport(self) -> str:
        return "ipc"

    @default("ip")
    def _local_sockets(self) -> str:
        return _socket_prefix() if self.transport == "ipc" else "127.0.0.1"


class AsyncLocalKernelManager(AsyncKernelManager):
    """:class:`LocalKernelManager`'s sockets for nbclient (``kernel_manager_class=``)."""

    @default("transport")
    def _local_transport(self) -> str:
        return "ipc"

    @default("ip")
    def _local_sockets(self) -> str:
        return _socket_prefix() if self.transport == "ipc" else "127.0.0.1"


class CellError(AssertionError):
    """A cell raised; the message holds the kernel's traceback."""


def make_kernel_manager(
    python: str, spec_dir: Path, manager: type[KernelManager] = LocalKernelManager
) -> KernelManager:
    """A KernelManager for ``python -m ipykernel_launcher`` with a kernelspec of its own."""
    kernel_dir = spec_dir / "kernels" / "nbagent-test"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "nbagent test kernel",
        "language": "python",
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(spec_dir / "kernels")])
    return manager(kernel_name="nbagent-test", kernel_spec_manager=specs)


class Kernel:
    """One running kernel plus what a widget frontend would know about it."""

    def __init__(self, km: KernelManager) -> None:
        self.km = km
        self.kc = km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.iopub: list[dict[str, Any]] = []
        self.widgets: dict[str, dict[str, Any]] = {}
        self.customs: dict[str, list[Any]] = {}
        self.comm_messages = 0
        self.replies: dict[str, dict[str, Any]] = {}
        self.closed: set[str] = set()
        self._codes: dict[str, str] = {}

    def shutdown(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    # --- iopub ------------------------------------------------------------------------------

    def _apply(self, msg: dict[str, Any]) -> None:
        self.iopub.append(msg)
        kind = msg["msg_type"]
        content = msg["content"]
        if kind == "comm_open" and content.get("target_name") == WIDGET_TARGET:
            self.widgets[content["comm_id"]] = dict(content["data"].get("state", {}))
            self.comm_messages += 1
        elif kind == "comm_close":
            self.closed.add(content["comm_id"])
        elif kind == "comm_msg":
            self.comm_messages += 1
            comm_id = content["comm_id"]
            data = content.get("data", {})
            method = data.get("method")
            if method in ("update", "echo_update"):
                self.widgets.setdefault(comm_id, {}).update(data.get("state", {}))
            elif method == "custom":
                self.customs.setdefault(comm_id, []).append(data.get("content"))

    def pump(self, timeout: float = 0.05) -> bool:
        """Read one iopub message if one comes within ``timeout``."""
        try:
            msg = self.kc.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return False
        self._apply(msg)
        return True

    def drain(self, quiet: float = 0.3) -> None:
        """Read until iopub has been quiet for ``quiet`` seconds."""
        while self.pump(quiet):
            pass

    def wait_for(self, check: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
        """Read iopub until ``check()`` is truthy; return its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or check}")
            self.pump(0.05)

    # --- shell ------------------------------------------------------------------------------

    def execute(
        self, code: str, *, timeout: float = 60.0, allow_errors: bool = False
    ) -> list[dict[str, Any]]:
        """Run a cell and return the iopub messages it produced (until the kernel went idle)."""
        return self.finish(self.submit(code), timeout=timeout, allow_errors=allow_errors)

    def submit(self, code: str) -> str:
        """Send a cell to run and return at once (its msg_id): a cell that awaits its run can
        be clicked while it runs. :meth:`finish` waits for it."""
        msg_id = str(self.kc.execute(code))
        self._codes[msg_id] = code
        return msg_id

    def finish(
        self, msg_id: str, *, timeout: float = 60.0, allow_errors: bool = False
    ) -> list[dict[str, Any]]:
        """Wait for a submitted cell: its reply, then iopub until the kernel is idle after it."""
        deadline = time.monotonic() + timeout
        code = self._codes.get(msg_id, "")
        for _ in range(20):
            reply = None
            while reply is None:
                self._pump_iopub_nowait()
                try:
                    msg = self.kc.get_shell_msg(timeout=0.05)
                except queue.Empty:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"cell did not finish: {code[:80]!r}") from None
                    continue
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            # ipykernel 6 aborts requests queued just after a cell failed: send it again
            if reply["content"]["status"] != "aborted" or not code:
                break
            time.sleep(0.1)
            msg_id = self.submit(code)
        self.replies[msg_id] = reply
        idle = any(self._is_idle(m, msg_id) for m in self.iopub)
        while not idle:
            if time.monotonic() > deadline:
                raise AssertionError(f"cell did not finish: {code[:80]!r}")
            try:
                msg = self.kc.get_iopub_msg(timeout=1)
            except queue.Empty:
                continue
            self._apply(msg)
            idle = self._is_idle(msg, msg_id)
        mine = [m for m in self.iopub if m["parent_header"].get("msg_id") == msg_id]
        if reply["content"]["status"] != "ok" and not allow_errors:
            trace = "\n".join(reply["content"].get("traceback", []))
            raise CellError(f"cell failed: {reply['content'].get('ename')}\n{trace}")
        return mine

    @staticmethod
    def _is_idle(msg: dict[str, Any], msg_id: str) -> bool:
        return (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        )

    def _pump_iopub_nowait(self) -> None:
        while self.pump(0):
            pass

    def running(self, msg_id: str) -> bool:
        """True while a submitted cell has not replied."""
        self._pump_iopub_nowait()
        return not any(self._is_idle(m, msg_id) for m in self.iopub)

    def eval(self, expression: str) -> Any:
        """The value of a Python literal expression evaluated in the kernel."""
        for _ in range(20):
            msg_id = self.kc.execute("", user_expressions={"x": f"repr({expression})"})
            while True:
                msg = self.kc.get_shell_msg(timeout=30)
                if msg["parent_header"].get("msg_id") == msg_id:
                    break
            content = msg["content"]
            # ipykernel 6 aborts requests queued just after a cell failed: ask again
            if content["status"] != "aborted":
                break
            time.sleep(0.1)
        if content["status"] != "ok":
            raise CellError(f"{expression}: {content.get('ename')}: {content.get('evalue')}")
        found = content["user_expressions"]["x"]
        if found["status"] != "ok":
            raise CellError(f"{expression}: {found.get('ename')}: {found.get('evalue')}")
        return ast.literal_eval(ast.literal_eval(found["data"]["text/plain"]))

    def send_comm(self, comm_id: str, data: dict[str, Any]) -> None:
        """Send a comm message on the shell channel, exactly as a browser does."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)

    def click(self, comm_id: str) -> None:
        self.send_comm(comm_id, {"method": "custom", "content": {"event": "click"}})

    def type_into(self, comm_id: str, value: str) -> None:
        """What a Text widget sends when the person types."""
        self.send_comm(comm_id, {"method": "update", "state": {"value": value}, "buffer_paths": []})
        self.widgets[comm_id]["value"] = value

    # --- outputs, as a frontend keeps them -------------------------------------------------

    def cell_outputs(self, msg_id: str) -> list[dict[str, Any]]:
        """The outputs of one cell as a notebook would save them: display updates applied (a
        display id is updated wherever it is, whichever message sent the update)."""
        outputs: list[dict[str, Any]] = []
        by_id: dict[str, list[int]] = {}
        for msg in self.iopub:
            kind, content = msg["msg_type"], msg["content"]
            display_id = (content.get("transient") or {}).get("display_id")
            if kind == "update_display_data":
                for index in by_id.get(display_id, []):
                    outputs[index] = {
                        "output_type": "display_data",
                        "data": content["data"],
                        "metadata": content.get("metadata", {}),
                    }
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if kind in ("display_data", "execute_result"):
                if display_id:
                    by_id.setdefault(display_id, []).append(len(outputs))
                outputs.append(
                    {
                        "output_type": kind,
                        "data": content["data"],
                        "metadata": content.get("metadata", {}),
                    }
                )
            elif kind == "stream":
                outputs.append(
                    {"output_type": "stream", "name": content["name"], "text": content["text"]}
                )
            elif kind == "error":
                outputs.append({"output_type": "error", "ename": content["ename"]})
        return outputs

    def live_outputs(self, msg_id: str) -> list[dict[str, Any]]:
        """The cell's outputs that show a widget (a notebook saved now would need the kernel)."""
        return [o for o in self.cell_outputs(msg_id) if WIDGET_VIEW in o.get("data", {})]

    def wait_static(self, msg_id: str) -> list[dict[str, Any]]:
        """After a shutdown: wait until the kernel's last messages turned every live output of
        the cell into a finished one (they may still be on their way when the process is gone:
        a fixed wait for quiet once missed them on a loaded machine); the outputs then."""
        self.wait_for(
            lambda: not self.live_outputs(msg_id),
            timeout=60,
            what="the finished output in place of the live one",
        )
        return self.cell_outputs(msg_id)

    def cell_text(self, msg_id: str, mime: str = "text/plain") -> str:
        """Every output of a cell in one text (``mime`` of displays, and streams)."""
        parts = []
        for output in self.cell_outputs(msg_id):
            if output["output_type"] == "stream":
                parts.append(output["text"])
            elif output["output_type"] != "error":
                parts.append(str(output["data"].get(mime, "")))
        return "\n".join(parts)

    # --- widget queries ---------------------------------------------------------------------

    def mark(self) -> int:
        """A bookmark: widgets created after it belong to what comes next."""
        self.drain(0.05)
        return len(self.widgets)

    def widget_ids(self, model: str, *, since: int = 0, **state: Any) -> list[str]:
        """Widgets of a model class (e.g. "ButtonModel") whose state matches ``state``."""
        return [
            comm_id
            for comm_id, s in list(self.widgets.items())[since:]
            if s.get("_model_name") == model and all(s.get(k) == v for k, v in state.items())
        ]

    def buttons(
        self, description: str, *, enabled: bool | None = None, since: int = 0
    ) -> list[str]:
        found = self.widget_ids("ButtonModel", since=since, description=description)
        if enabled is not None:
            found = [c for c in found if (not self.widgets[c].get("disabled")) == enabled]
        return found

    def stream_text(self, comm_id: str) -> str:
        """A TextStream's text, rebuilt from its state and deltas as the browser does."""
        value = self.widgets[comm_id].get("value", "")
        for content in self.customs.get(comm_id, []):
            if isinstance(content, list) and len(content) == 2 and content[0] == len(value):
                value += content[1]
        return value

    def streams(self, since: int = 0) -> list[str]:
        return [
            c
            for c, s in list(self.widgets.items())[since:]
            if s.get("_anywidget_id", "").endswith("TextStream")
        ]

    def html_texts(self, since: int = 0) -> list[str]:
        return [
            s.get("value", "")
            for s in list(self.widgets.values())[since:]
            if s.get("_model_name") == "HTMLModel"
        ]

    def footer(self, since: int) -> str:
        """The run footer (the last HTML widget that reports steps) of the run after ``since``."""
        texts = [t for t in self.html_texts(since) if " step" in t and "tokens" in t]
        return texts[0] if texts else ""

    def outputs_of(self, comm_id: str) -> list[dict[str, Any]]:
        return list(self.widgets[comm_id].get("outputs", []))

    def all_output_text(self, since: int = 0) -> str:
        """Every text inside every Output widget (results, errors, tracebacks)."""
        parts = []
        for state in list(self.widgets.values())[since:]:
            if state.get("_model_name") != "OutputModel":
                continue
            for output in state.get("outputs", []):
                if output.get("output_type") == "stream":
                    parts.append(output.get("text", ""))
                else:
                    parts.append(str(output.get("data", {}).get("text/plain", "")))
        return "\n".join(parts)
