"""A budget is one account for the whole run tree: the caller, its helpers running in parallel
(actually overlapping in time: the loopback server holds their requests until both arrived),
a map's rows; in every unit (requests, tokens, dollars), an unknown price refusing under a
money budget, and reservations released when a request fails or a run is cancelled.

Against a real OpenAI-compatible HTTP server on 127.0.0.1 that answers by the request's model
and counts every request it received."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Callable
from typing import Any

from nbagent import Agent, Budget
from nbagent._ground.spending import Account, BudgetRefusal, Reservation, Waiting
from nbagent.events import HelperEvent, RunFinished
from nbagent.generation import Options
from nbagent.providers import OpenAIChat
from nbagent.tools import tool

from .providers import wire

KEY = "sk-test-budget-tree-0123456789abcdef"
#: How long the server waits for the overlap it was asked to make before it gives up (a
#: failed overlap fails the test; it never passes on luck).
OVERLAP_WAIT = 30.0


class ModelServer:
    """A threaded HTTP server: ``answer(body)`` gives each request's SSE (or ``(status,
    json)`` for an error); ``hold(body)`` may give a barrier the request waits at before its
    answer is sent, so that requests overlap for real."""

    def __init__(
        self,
        answer: Callable[[dict[str, Any]], bytes | tuple[int, dict[str, Any]]],
        hold: Callable[[dict[str, Any]], threading.Barrier | threading.Event | None] = (
            lambda body: None
        ),
    ) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.broken: list[str] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with owner._lock:
                    owner.bodies.append(body)
                    owner.in_flight += 1
                    owner.most_in_flight = max(owner.most_in_flight, owner.in_flight)
                    made = answer(body)
                    gate = hold(body)
                try:
                    if isinstance(gate, threading.Barrier):
                        try:
                            gate.wait(OVERLAP_WAIT)
                        except threading.BrokenBarrierError:
                            owner.broken.append(body.get("model", ""))
                    elif gate is not None and not gate.wait(OVERLAP_WAIT):
                        owner.broken.append(body.get("model", ""))
                finally:
                    with owner._lock:
                        owner.in_flight -= 1
                if isinstance(made, tuple):
                    status, error = made
                    data, kind = json.dumps(error).encode(), "application/json"
                else:
                    status, data, kind = 200, made, "text/event-stream"
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def of(self, model: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b.get("model") == model]

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def results(body: dict[str, Any]) -> int:
    return sum(1 for m in body.get("messages", ()) if m.get("role") == "tool")


def calls(*pairs: tuple[str, str, dict[str, Any]], usage: tuple[int, int] = (80, 20)) -> bytes:
    return wire.openai_sse(
        [
            wire.oa_chunk({"role": "assistant", "content": ""}),
            wire.oa_chunk(
                {
                    "tool_calls": [
                        wire.oa_call(i, call_id, name, json.dumps(args))
                        for i, (call_id, name, args) in enumerate(pairs)
                    ]
                }
            ),
            wire.oa_chunk({}, "tool_calls"),
            wire.oa_usage(*usage),
        ]
    )


def text(words: str, usage: tuple[int, int] = (80, 20)) -> bytes:
    return wire.openai_sse(
        [
            wire.oa_chunk({"role": "assistant", "content": ""}),
            wire.oa_chunk({"content": words}),
            wire.oa_chunk({}, "stop"),
            wire.oa_usage(*usage),
        ]
    )


@tool
def lookup(word: str) -> str:
    """Look a word up."""
    return f"{word}: found"


def researching_server(
    caller: str, helper: str, *, usage: tuple[int, int] = (80, 20)
) -> ModelServer:
    """The caller asks two helpers at once, then answers; each helper looks a new word up on
    every turn, for ever (only a budget stops it). The first request of each helper waits
    until the other helper's first request arrived too: their runs overlap for real."""
    counter = iter(range(1_000_000))
    overlap = threading.Barrier(2)

    def answer(body: dict[str, Any]) -> bytes:
        if body["model"] == caller:
            if results(body) == 0:
                return calls(
                    ("c1", "research", {"prompt": "rivers"}),
                    ("c2", "research", {"prompt": "mountains"}),
                    usage=usage,
                )
            return text("done", usage)
        return calls(("h", "lookup", {"word": f"w{next(counter)}"}), usage=usage)

    def hold(body: dict[str, Any]) -> threading.Barrier | None:
        return overlap if body["model"] == helper and results(body) == 0 else None

    return ModelServer(answer, hold)


def agents(
    server: ModelServer, caller: str, helper: str, helper_options: Options | None = None
) -> tuple[Agent, list[OpenAIChat]]:
    models = [
        OpenAIChat(caller, api_key=KEY, base_url=server.url),
        OpenAIChat(helper, api_key=KEY, base_url=server.url),
    ]
    researcher = Agent(models[1], [lookup], options=helper_options, max_steps=50)
    planner = Agent(
        models[0],
        [researcher.as_tool(name="research", description="Looks facts up.")],
        max_steps=50,
    )
    return planner, models


async def closed(models: list[OpenAIChat]) -> None:
    for model in models:
        await model.aclose()


async def test_parallel_helpers_share_the_callers_request_budget() -> None:
    with researching_server("planner-model", "helper-model") as server:
        planner, models = agents(server, "planner-model", "helper-model")
        result = await planner.run("rivers and mountains", budget=Budget(requests=4))
        await closed(models)
    assert server.broken == [] and server.most_in_flight >= 2  # the helpers overlapped
    # the caller's one request, then the helpers' from what was left: 4 in all, not 1 + 3 + 3
    assert len(server.bodies) == 4, [b["model"] for b in server.bodies]
    assert result.stop_reason == "budget"
    assert "request(s) is spent" in result.stop_detail
    helper_texts = [part.text for part in result.messages[2].results]
    assert all("research stopped early: " in t for t in helper_texts), helper_texts


async def test_parallel_helpers_share_the_callers_token_budget() -> None:
    # every answer reports 200 tokens; each helper bounds its answers with max_tokens, so the
    # estimate of its requests is known before they are sent
    with researching_server("planner-model", "helper-model", usage=(150, 50)) as server:
        planner, models = agents(server, "planner-model", "helper-model", Options(max_tokens=300))
        result = await planner.run("rivers and mountains", budget=Budget(tokens=1_000))
        await closed(models)
    assert server.broken == [] and server.most_in_flight >= 2
    spent = 200 * len(server.bodies)
    assert spent <= 1_000, [b["model"] for b in server.bodies]
    assert result.usage.total_tokens == spent  # the result counts the helpers' tokens too
    assert len(server.of("helper-model")) >= 2  # both helpers were let go while they fitted


async def test_a_money_budget_reaches_a_helper_and_an_unknown_price_refuses() -> None:
    with researching_server("gpt-4.1-mini", "no-such-model-7") as server:
        planner, models = agents(server, "gpt-4.1-mini", "no-such-model-7")
        result = await planner.run("rivers and mountains", budget=Budget(usd=0.01))
        await closed(models)
    assert server.of("no-such-model-7") == []  # the helpers sent nothing, blind
    assert len(server.of("gpt-4.1-mini")) == 2 and result.stop_reason == "finished"
    for part in result.messages[2].results:
        text_ = part.content[0].text  # type: ignore[union-attr]
        assert (
            "The price of no-such-model-7 is unknown, so the run's budget of $0.01 cannot be "
            "kept: nothing was sent (a price is never guessed)." in text_
        ), text_


async def test_the_sentence_of_an_unknown_price_is_the_runs_own_stop_detail() -> None:
    with ModelServer(lambda body: text("hi")) as server:
        model = OpenAIChat("no-such-model-7", api_key=KEY, base_url=server.url)
        result = await Agent(model).run("hello", budget=Budget(usd=1.0))
        await model.aclose()
    assert result.stop_reason == "budget" and server.bodies == []
    assert result.stop_detail.startswith("The price of no-such-model-7 is unknown")


async def test_a_maps_budget_bounds_the_whole_map() -> None:
    overlap = threading.Barrier(2)

    def hold(body: dict[str, Any]) -> threading.Barrier | None:
        # the first two rows' requests wait for each other: two rows in flight at once
        if len(server.bodies) <= 2:
            return overlap
        return None

    server = ModelServer(lambda body: text("yes"), hold)
    with server:
        model = OpenAIChat("row-model", api_key=KEY, base_url=server.url)
        agent = Agent(model)
        table = await agent.map(
            ["a", "b", "c", "d", "e"], budget=Budget(requests=3), concurrency=4, progress=None
        )
        await model.aclose()
    assert server.broken == [] and server.most_in_flight >= 2
    assert len(server.bodies) == 3
    statuses = list(table["status"])
    assert statuses.count("done") == 3 and statuses.count("not run") == 2, statuses
    refused = table[table["status"] == "not run"]
    assert all("The map's budget of 3 request(s) is spent" in e for e in refused["error"])


async def test_a_failed_request_releases_what_it_held() -> None:
    # the first row fails with a 400 (never retried): its request counts, its tokens do not
    # stay held, so the next rows run within the same token budget
    answers = iter([(400, {"error": {"message": "bad", "type": "invalid_request_error"}})])

    def answer(body: dict[str, Any]) -> bytes | tuple[int, dict[str, Any]]:
        return next(answers, None) or text("yes", (30, 10))

    with ModelServer(answer) as server:
        model = OpenAIChat("row-model", api_key=KEY, base_url=server.url)
        agent = Agent(model, options=Options(max_tokens=60))
        table = await agent.map(
            ["a", "b", "c"], budget=Budget(tokens=200), concurrency=1, progress=None, retries=0
        )
        await model.aclose()
    assert list(table["status"]) == ["failed", "done", "done"]
    assert len(server.bodies) == 3


async def test_a_cancelled_helper_releases_its_reservation() -> None:
    account = Account(Budget(tokens=100))
    first = account.reserve(90)
    assert isinstance(first, Reservation)
    waiting = account.reserve(20)  # only the request in flight keeps it from fitting
    assert isinstance(waiting, Waiting)
    first.release()  # cancelled before it was sent: nothing spent
    await asyncio.wait_for(asyncio.ensure_future(_awaited(waiting)), 5)
    second = account.reserve(20)
    assert isinstance(second, Reservation) and account.spent_requests == 0
    second.settle(150)  # the answer went over: spent, and nothing more fits
    refused = account.reserve(1)
    assert isinstance(refused, BudgetRefusal) and "tokens is spent" in refused.sentence
    assert account.held_tokens == 0 and account.spent_requests == 1


async def _awaited(waiting: Waiting) -> None:
    await waiting


def test_the_account_is_thread_safe() -> None:
    account = Account(Budget(requests=500))
    taken: list[Reservation] = []
    lock = threading.Lock()

    def spend() -> None:
        while True:
            got = account.reserve()
            if isinstance(got, BudgetRefusal):
                return
            assert isinstance(got, Reservation)
            got.settle(1)
            with lock:
                taken.append(got)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == 500 and account.spent_requests == 500 and account.held_requests == 0


def test_nested_accounts_stop_at_whichever_is_spent_first() -> None:
    outer = Account(Budget(requests=3))
    inner = Account(Budget(tokens=50), outer, label="the helper's own budget")
    got = inner.reserve(40)
    assert isinstance(got, Reservation)
    got.settle(45)
    refused = inner.reserve(10)
    assert isinstance(refused, BudgetRefusal)
    assert refused.sentence.startswith("The helper's own budget of 50 tokens cannot pay")
    assert outer.spent_requests == 1 and outer.spent_tokens == 45


async def test_a_helper_stopped_by_the_budget_says_so_in_its_own_result() -> None:
    ends: list[Any] = []
    with researching_server("planner-model", "helper-model") as server:
        planner, models = agents(server, "planner-model", "helper-model")
        planner.observe(
            lambda run_id, event: (
                ends.append(event.event)
                if isinstance(event, HelperEvent) and isinstance(event.event, RunFinished)
                else None
            )
        )
        await planner.run("rivers and mountains", budget=Budget(requests=4))
        await closed(models)
    assert len(ends) == 2
    assert all(e.result.stop_reason == "budget" and e.result.stop_detail for e in ends)


def test_the_calls_of_a_served_session_share_its_budget() -> None:
    """Two MCP clients' calls of a served helper run at once; the session's budget bounds
    what both spend together (each would look words up for ever)."""
    from nbagent.approvals.approval import AutoApprove
    from nbagent.loop._served import ServedCalls

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    counter = iter(range(1_000_000))
    overlap = threading.Barrier(2)

    def hold(body: dict[str, Any]) -> threading.Barrier | None:
        return overlap if results(body) == 0 else None

    def answer(body: dict[str, Any]) -> bytes:
        return calls(("h", "lookup", {"word": f"w{next(counter)}"}))

    try:
        with ModelServer(answer, hold) as server:
            model = OpenAIChat("helper-model", api_key=KEY, base_url=server.url)
            helper = Agent(model, [lookup], max_steps=50)
            served = {"research": helper.as_tool(name="research", description="Looks up.")}
            session = ServedCalls(
                lambda: served,
                AutoApprove(),
                lambda event: None,
                loop=loop,
                budget=Budget(requests=5),
            )
            found, arguments = session.check("research", {"prompt": "rivers"})
            first = session.submit(found, arguments)
            second = session.submit(found, {"prompt": "mountains"})
            answers = [first.result(timeout=60), second.result(timeout=60)]
            asyncio.run_coroutine_threadsafe(model.aclose(), loop).result(timeout=10)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    assert server.broken == [] and server.most_in_flight >= 2
    assert len(server.bodies) == 5
    said = [part.text for result in answers for part in result.content]  # type: ignore[union-attr]
    assert all("The serving's budget of 5 request(s) is spent" in text_ for text_ in said), said


async def test_the_terminal_and_the_saved_cell_say_which_budget_stopped_the_run() -> None:
    import io

    from nbagent.notebook.shown.transcript import Transcript
    from nbagent.terminal._console import Console
    from nbagent.terminal._view import TerminalView

    with ModelServer(lambda body: text("hi")) as server:
        model = OpenAIChat("no-such-model-7", api_key=KEY, base_url=server.url)
        transcript = Transcript()
        run = Agent(model).start("hello", budget=Budget(usd=0.5))
        async for event in run.events():
            transcript.handle(event)
        await model.aclose()
    result = run.final
    assert result is not None
    said = "stopped: the price of no-such-model-7 is unknown, so the run's budget of $0.5"
    assert TerminalView(Console(io.StringIO())).summary(result).startswith(said)
    assert transcript.footer().startswith(said)


async def test_nested_helpers_spend_from_the_one_account() -> None:
    """The planner asks a researcher, which asks two diggers at once, which dig for ever: every
    request of the three levels reserves from the planner's budget (a copy handed down would
    let each digger spend all the researcher was given)."""
    counter = iter(range(1_000_000))
    overlap = threading.Barrier(2)

    def answer(body: dict[str, Any]) -> bytes:
        if body["model"] == "planner-model":
            if results(body) == 0:
                return calls(("p", "research", {"prompt": "rivers"}))
            return text("done")
        if body["model"] == "middle-model":
            if results(body) == 0:
                return calls(("m1", "dig", {"prompt": "Rhine"}), ("m2", "dig", {"prompt": "Po"}))
            return text("dug")
        return calls(("d", "lookup", {"word": f"w{next(counter)}"}))

    def hold(body: dict[str, Any]) -> threading.Barrier | None:
        return overlap if body["model"] == "deep-model" and results(body) == 0 else None

    with ModelServer(answer, hold) as server:
        models = [
            OpenAIChat(name, api_key=KEY, base_url=server.url)
            for name in ("planner-model", "middle-model", "deep-model")
        ]
        digger = Agent(models[2], [lookup], max_steps=50)
        researcher = Agent(
            models[1], [digger.as_tool(name="dig", description="Digs.")], max_steps=50
        )
        planner = Agent(models[0], [researcher.as_tool(name="research", description="Looks up.")])
        result = await planner.run("go", budget=Budget(requests=7))
        await closed(models)
    assert server.broken == [] and server.most_in_flight >= 2  # the diggers overlapped
    # planner 1, researcher 1, then the diggers share the 5 left: 7 in all (a copy of the
    # remainder per level would have let 1 + 1 + 5 + 5 through)
    assert len(server.bodies) == 7, [b["model"] for b in server.bodies]
    assert len(server.of("deep-model")) == 5
    assert result.stop_reason == "budget" and "7 request(s) is spent" in result.stop_detail


def test_an_account_handed_to_runs_bounds_them_together() -> None:
    """An account that outlives one run (a session's): every run started inside
    ``spending(account)`` reserves from it (``run_sync`` runs on a worker thread of its own,
    with the caller's context), and each run's own budget bounds it under that account."""
    from nbagent._ground.spending import spending

    with ModelServer(lambda body: calls(("x", "lookup", {"word": "w"}))) as server:
        model = OpenAIChat("row-model", api_key=KEY, base_url=server.url)
        session = Account(Budget(requests=5), label="the session's budget")
        with spending(session):
            first = Agent(model, [lookup], max_steps=3).run_sync("a")
            second = Agent(model, [lookup], max_steps=50).run_sync(
                "b", budget=Budget(tokens=10_000)
            )
        third = Agent(model, [lookup], max_steps=1).run_sync("c")  # outside: not bounded
        asyncio.run(model.aclose())
    assert first.stop_reason == "max_steps" and first.steps == 3
    assert second.stop_reason == "budget" and second.steps == 2
    assert second.stop_detail.startswith("The session's budget of 5 request(s) is spent")
    assert third.stop_reason == "max_steps"
    assert len(server.bodies) == 6 and session.spent_requests == 5 and session.held_requests == 0


def test_an_unknown_price_without_the_table_says_what_installs_it(
    monkeypatch: Any,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "genai_prices", None)  # as if the extra were missing
    with ModelServer(lambda body: text("hi")) as server:
        model = OpenAIChat("gpt-4.1-mini-unlisted", api_key=KEY, base_url=server.url)
        result = Agent(model).run_sync("hello", budget=Budget(usd=1.0))
        asyncio.run(model.aclose())
    assert result.stop_reason == "budget" and server.bodies == []
    assert result.stop_detail.endswith(
        "nothing was sent (a price is never guessed). Knowing what a model's tokens cost needs "
        'the prices extra (genai_prices is not installed here): pip install "nbagent[prices]"'
    ), result.stop_detail
