"""Widget traffic of a long streamed answer: the nbagent run view vs naive per-token updates.

A real kernel (this venv's ipykernel) streams N tokens at a fixed rate twice:

* **nbagent view**: ``%agent`` with a paced model; the run view sends text deltas at a bounded
  rate through its TextStream widget.
* **naive**: an ``ipywidgets.HTML`` whose ``.value += token`` is set once per token (what a
  simple front end does; every update resends the whole text).

The client counts every widget message on iopub (comm_open + comm_msg): how many, the busiest
second, bytes of the comm payload and of the whole message (headers included) relative to the
text's size, and the kernel's CPU time (``time.process_time`` in the kernel) for the run.

    python benchmarks/notebook_traffic.py [--tokens 20000] [--rate 500] [--naive-tokens N]

Goals (issue 4): at most 30 messages a second per view; bytes at most 3x the text.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

SETUP = """
import asyncio, random, time
import nbagent, nbagent.notebook
from nbagent.generation import Finish, TextDelta, Usage
get_ipython().run_line_magic("load_ext", "nbagent")

def make_tokens(count, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 9)))
        out.append(f" {word}" if i % 120 else "\\n\\n" + word)
    return out

async def paced(words, rate):
    start = time.monotonic()
    for i, word in enumerate(words):
        yield word
        if rate:
            delay = start + (i + 1) / rate - time.monotonic()
            await asyncio.sleep(max(0.0, delay))
        elif i % 50 == 0:
            await asyncio.sleep(0)

class PacedModel:
    model = "paced"
    def __init__(self, words, rate):
        self.words, self.rate = words, rate
    async def stream(self, request):
        async for word in paced(self.words, self.rate):
            yield TextDelta(word)
        yield Finish("stop", Usage(0, len(self.words)), "stop")

bench = {}
"""

OURS = """
words = make_tokens({tokens})
bench.update(text=len("".join(words).encode()), done=False)
session = nbagent.notebook.current_session()
session.set_model(PacedModel(words, {rate}))
bench["cpu0"] = time.process_time()
get_ipython().run_line_magic("agent", "--new -o result write")
"""

OURS_DONE = "session.active is None and not bench.update(cpu=time.process_time() - bench['cpu0'])"

LOOP_ONLY = """
words = make_tokens({tokens})
bench.update(text=len("".join(words).encode()), done=False)
agent = nbagent.Agent(PacedModel(words, {rate}))

async def loop_only():
    cpu0 = time.process_time()
    run = agent.start("write")
    async for _ in run.events():
        pass
    bench.update(cpu=time.process_time() - cpu0, done=True)

task = asyncio.get_event_loop().create_task(loop_only())
"""

NAIVE = """
import ipywidgets
from IPython.display import display
words = make_tokens({tokens})
bench.update(text=len("".join(words).encode()), done=False)
box = ipywidgets.HTML()
display(box)

async def naive():
    cpu0 = time.process_time()
    async for word in paced(words, {rate}):
        box.value += word
    bench.update(cpu=time.process_time() - cpu0, done=True)

task = asyncio.get_event_loop().create_task(naive())
"""


@dataclass
class Measured:
    label: str
    tokens: int
    text_bytes: int
    messages: int
    peak_per_second: int
    payload_bytes: int
    wire_bytes: int
    kernel_cpu: float
    wall: float

    def row(self) -> str:
        def ratio(value: int) -> str:
            return f"{value / self.text_bytes:.2f}x" if self.messages else "-"

        return (
            f"{self.label:<24}{self.tokens:>8,}{self.messages:>10,}{self.peak_per_second:>8}"
            f"{self.messages / max(self.wall, 1e-9):>9.1f}"
            f"{ratio(self.payload_bytes):>12}{ratio(self.wire_bytes):>11}"
            f"{self.kernel_cpu:>10.2f} s{self.kernel_cpu / self.tokens * 1e6:>8.0f} us"
            f"{self.wall:>8.1f} s"
        )


HEADER = (
    f"{'':<24}{'tokens':>8}{'messages':>10}{'peak/s':>8}{'avg/s':>9}"
    f"{'payload':>12}{'wire':>11}{'kernel CPU':>12}{'/token':>11}{'wall':>10}"
)


class Kernel:
    def __init__(self) -> None:
        spec_dir = Path(tempfile.mkdtemp(prefix="nbagent-bench-"))
        kernel_dir = spec_dir / "kernels" / "bench"
        kernel_dir.mkdir(parents=True)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (kernel_dir / "kernel.json").write_text(
            json.dumps({"argv": argv, "display_name": "bench", "language": "python"})
        )
        specs = KernelSpecManager(kernel_dirs=[str(spec_dir / "kernels")])
        self.km = KernelManager(kernel_name="bench", kernel_spec_manager=specs)
        self.km.start_kernel()
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.seen: list[tuple[float, int, int]] = []  # receive time, payload bytes, wire bytes

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def _record(self, msg: dict[str, Any]) -> None:
        if msg["msg_type"] not in ("comm_open", "comm_msg"):
            return
        payload = len(json.dumps(msg["content"].get("data"), ensure_ascii=False).encode())
        wire = len(
            json.dumps(
                [msg["header"], msg["parent_header"], msg["metadata"], msg["content"]],
                ensure_ascii=False,
                default=str,
            ).encode()
        )
        self.seen.append((time.monotonic(), payload, wire))

    def pump(self, timeout: float) -> None:
        try:
            self._record(self.kc.get_iopub_msg(timeout=timeout))
        except queue.Empty:
            pass

    def execute(self, code: str) -> None:
        msg_id = self.kc.execute(code)
        while True:
            reply = self.kc.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        if reply["content"]["status"] != "ok":
            raise RuntimeError("\n".join(reply["content"].get("traceback", [])))

    def eval(self, expression: str) -> Any:
        msg_id = self.kc.execute("", user_expressions={"x": expression})
        while True:
            reply = self.kc.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        found = reply["content"]["user_expressions"]["x"]
        if found["status"] != "ok":
            raise RuntimeError(f"{expression}: {found.get('evalue')}")
        return eval(found["data"]["text/plain"])  # a literal we asked for

    def measure(self, label: str, code: str, done: str, tokens: int) -> Measured:
        while self.seen or self._drain_once():
            self.seen.clear()
        start = time.monotonic()
        self.execute(code)
        next_check = time.monotonic() + 0.5
        while True:
            self.pump(0.05)
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + 0.5
                if self.eval(done):
                    break
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:  # the last messages still in flight
            self.pump(0.05)
        seen = list(self.seen)
        times = [t for t, _, _ in seen]
        peak, first = 0, 0
        for last, t in enumerate(times):
            while t - times[first] >= 1.0:
                first += 1
            peak = max(peak, last - first + 1)
        wall = (times[-1] - start) if times else 0.0
        return Measured(
            label,
            tokens,
            int(self.eval("bench['text']")),
            len(seen),
            peak,
            sum(p for _, p, _ in seen),
            sum(w for _, _, w in seen),
            float(self.eval("bench['cpu']")),
            wall,
        )

    def _drain_once(self) -> bool:
        try:
            self._record(self.kc.get_iopub_msg(timeout=0.2))
            return True
        except queue.Empty:
            return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=500.0, help="tokens/s; 0 = unpaced")
    parser.add_argument("--naive-tokens", type=int, default=None, help="default: --tokens")
    args = parser.parse_args()
    naive_tokens = args.naive_tokens or args.tokens
    kernel = Kernel()
    try:
        kernel.execute(textwrap.dedent(SETUP))
        ours = kernel.measure(
            "nbagent view",
            textwrap.dedent(OURS.format(tokens=args.tokens, rate=args.rate)),
            OURS_DONE,
            args.tokens,
        )
        loop = kernel.measure(
            "agent loop, no view",
            textwrap.dedent(LOOP_ONLY.format(tokens=args.tokens, rate=args.rate)),
            "bench['done']",
            args.tokens,
        )
        naive = kernel.measure(
            "naive .value per token",
            textwrap.dedent(NAIVE.format(tokens=naive_tokens, rate=args.rate)),
            "bench['done']",
            naive_tokens,
        )
    finally:
        kernel.close()
    rate = f"{args.rate:g} tokens/s" if args.rate else "unpaced"
    print(
        f"Widget traffic of one streamed answer ({rate}; ipykernel kernel, iopub seen by a client)"
    )
    print(HEADER)
    print(ours.row())
    print(naive.row())
    print(loop.row())
    view_cpu = (ours.kernel_cpu - loop.kernel_cpu) / ours.tokens * 1e6
    print(
        f"view's own kernel CPU: about {view_cpu:.0f} us/token (nbagent view minus the bare loop)"
    )
    print(
        "payload = comm data bytes / text bytes; wire = whole messages (headers included) / text;"
        " peak/s = most messages in any one second"
    )
    met_rate = ours.peak_per_second <= 30
    met_bytes = ours.payload_bytes <= 3 * ours.text_bytes
    print(f"goal <=30 messages/s per view: {'met' if met_rate else 'NOT met'}")
    print(f"goal payload <=3x text: {'met' if met_bytes else 'NOT met'}")
    if naive.messages < naive.tokens:
        print(
            f"naive: the client saw {naive.messages:,} of {naive.tokens:,} updates "
            "(the kernel dropped the rest: iopub high-water mark)"
        )


if __name__ == "__main__":
    main()
