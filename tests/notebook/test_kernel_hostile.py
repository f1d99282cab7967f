"""What people type and what models and tools send, in a real kernel: odd prompts and targets,
subcommands alone, and text that must never reach the browser or a saved notebook as it came."""

from __future__ import annotations

import html
import json
import re
import textwrap
from pathlib import Path

import pytest

from .conftest import SECRET, kernel_env, start_kernel
from .kernel import Kernel
from .test_kernel_approval import in_cell, run_record, setup_run, wait_ended

#: Key-shaped text a model or a tool may produce (none of it is the kernel's own key).
KEY = "sk-proj-Zq81mN4vT0xR7pL2wK9s"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _leaks(text: str) -> list[str]:
    return [s for s in (KEY, TOKEN, SECRET, KEY[8:20]) if s in text]


def test_secrets_streamed_by_the_model_never_reach_the_widgets(kernel: Kernel) -> None:
    """A key split over many streamed pieces, a key as a call argument, in a progress update
    and in the prompt: no widget state, no delta and no saved output holds it."""
    tools = textwrap.dedent(
        f"""
        from nbagent.tools import ToolContext
        import time

        @tool
        def lookup(key: str, context: ToolContext) -> str:
            \"\"\"Look a key up.\"\"\"
            context.update("checking {TOKEN} now")
            time.sleep(0.3)
            return "ok"
        """
    )
    answer = f"Here is the key you asked about: {KEY} and a token {TOKEN} — keep them safe."
    since = setup_run(
        kernel,
        f"[Turn(Text({answer!r}, chunks=40), Call('lookup', {{'key': {KEY!r}}})), 'Done.']",
        tools=tools,
    )
    kernel.execute("model.chunk_delay = 0.03")
    cell = kernel.submit(f"%agent --new --approve auto check {KEY} please")
    kernel.finish(cell)
    assert run_record(kernel, cell)
    widgets = list(kernel.widgets)[since:]
    assert widgets
    for comm_id in widgets:
        state = kernel.widgets[comm_id]
        assert not _leaks(json.dumps(state)), state
        if "_anywidget_id" in state:  # a stream: the text as the browser rebuilt it
            assert not _leaks(kernel.stream_text(comm_id))
    sent = [m["content"] for m in kernel.iopub if m["msg_type"] == "comm_msg"]
    updates = [c for c in sent if c["comm_id"] in widgets]
    assert updates and not _leaks(json.dumps(updates, ensure_ascii=False))
    shown = [kernel.stream_text(c) for c in widgets if "_anywidget_id" in kernel.widgets[c]]
    assert any("Here is the key you asked about: ***" in text for text in shown)
    for output in kernel.cell_outputs(cell):
        assert not _leaks(json.dumps(output, ensure_ascii=False))


def test_a_tools_error_shows_no_key_in_the_cell_nor_sends_one_to_the_model(kernel: Kernel) -> None:
    """An exception quoting a request's headers: its message, its traceback (the card's
    Traceback section), the saved output and what the model reads next hold the key hidden."""
    tools = textwrap.dedent(
        f"""
        @tool
        def call_service() -> str:
            \"\"\"Call the service.\"\"\"
            headers = {{"Authorization": "Bearer {KEY}", "X-Token": "{TOKEN}"}}
            raise ConnectionError(f"refused: {{headers}}")
        """
    )
    since = setup_run(kernel, "[Turn(Call('call_service')), 'It failed.']", tools=tools)
    cell = kernel.submit("%agent --new --approve auto call the service")
    kernel.finish(cell)
    assert run_record(kernel, cell)
    widgets = list(kernel.widgets)[since:]
    states = json.dumps([kernel.widgets[c] for c in widgets], ensure_ascii=False)
    shown = kernel.all_output_text(since) + "".join(kernel.html_texts(since))
    assert "ConnectionError" in shown and "'Authorization': '***'" in shown, shown
    sent = [m["content"] for m in kernel.iopub if m["msg_type"] in ("comm_msg", "stream")]
    assert not _leaks(states + json.dumps(sent, ensure_ascii=False))
    saved = json.dumps(kernel.cell_outputs(cell), ensure_ascii=False)
    assert "refused" in saved and not _leaks(saved)
    read = kernel.eval("repr(model.requests[-1].messages[-1])")
    assert "refused" in read and "***" in read and not _leaks(read)


def test_history_usage_and_recordings_show_no_secrets(kernel: Kernel, tmp_path: Path) -> None:
    """The subcommands quote the conversation, prompts and recordings: keys in them are hidden."""
    tools = textwrap.dedent(
        f"""
        @tool
        def fetch_config() -> str:
            \"\"\"Read the service configuration.\"\"\"
            return "url=https://api.example.com token={TOKEN}"
        """
    )
    setup_run(kernel, f"[Turn('Your key is {KEY}.', Call('fetch_config')), 'Done.']", tools=tools)
    kernel.execute(f"%agent --new --approve auto use {KEY} to fetch the config")
    (tmp_path / f"hand-edited-{KEY}.json").write_text(
        json.dumps({"format": "nbagent-recording", "version": 1, "prompt": KEY, "steps": []})
    )
    kernel.execute(f"import os; os.environ['NBAGENT_RECORDINGS'] = {str(tmp_path)!r}")
    for command in ("history", "usage", "recording"):
        said = json.dumps(kernel.execute(f"%agent {command}"), ensure_ascii=False, default=str)
        assert not _leaks(said), command
        assert "***" in said, command


def test_a_key_in_a_prompt_does_not_name_its_recording(kernel: Kernel, tmp_path: Path) -> None:
    """Recordings are committed beside the notebook: their names hold no key, even lowercased."""
    setup_run(kernel, "['Fine.', 'Fine again.']")
    kernel.execute(f"import os; os.environ['NBAGENT_RECORDINGS'] = {str(tmp_path)!r}")
    kernel.execute(f"%agent --new --record --approve auto check {KEY} works")
    (saved,) = tmp_path.glob("*.json")
    assert saved.name.startswith("check-works-")
    assert KEY[8:20].lower() not in saved.name.lower()
    assert not _leaks(saved.read_text())
    kernel.execute(f"%agent --new --replay --approve auto check {KEY} works")  # found again
    assert "Fine." in kernel.eval("nbagent.notebook.current_session().agent.messages[-1].text")


def test_new_or_model_alone_changes_just_that(kernel: Kernel) -> None:
    """`%agent --new` is what an error tells people to run when a conversation outgrew the
    model's context; alone, it starts a new conversation instead of failing."""
    setup_run(kernel, "['First.', 'Second.']")
    kernel.execute("%agent --new --approve auto hello")
    messages = "len(nbagent.notebook.current_session().agent.messages)"
    assert kernel.eval(messages) == 2
    said = kernel.execute("%agent --new")
    assert "new conversation" in "".join(m["content"].get("text", "") for m in said)
    assert kernel.eval(messages) == 0
    kernel.execute("%agent -m offline")
    assert kernel.eval("nbagent.notebook.current_session().model_spec") == "offline"
    wrong = ("%agent --new -o x", "%agent -m offline --approve auto", "%agent", "%agent -o a.b hi")
    for line in (*wrong, "%agent -o class hi", "%agent map --over rows -o None {x}"):
        cell = kernel.submit(line)
        kernel.finish(cell, allow_errors=True)
        assert kernel.replies[cell]["content"]["ename"] == "UsageError", line


def test_an_assignment_that_cannot_await_gets_the_result(kernel: Kernel) -> None:
    """`x = %agent …` inside a function, a loop or an `if` runs the magic's plain form: x
    gets the RunResult (it got None), `{name}` reads the function's variables, and a bare
    `%agent` there still echoes nothing."""
    setup_run(kernel, "['One.', 'Two.', 'Three.', 'Four.']")
    cell = kernel.submit(
        textwrap.dedent(
            """
            def ask(topic):
                answer = %agent --approve auto tell me about {topic}
                return answer
            first = ask("owls")
            for n in range(1):
                second = %agent --approve auto and number {n}
            if True:
                %agent --approve auto a bare one
            def bare(word):
                %agent --approve auto one {word}
            bare("more")
            print("got", first.text, second.text, first.stop_reason)
            """
        )
    )
    kernel.finish(cell)
    assert "got One. Two. finished" in kernel.cell_text(cell)
    prompts = "[m.text for m in nbagent.notebook.current_session().agent.messages[::2]]"
    assert kernel.eval(prompts)[-4:] == [
        "tell me about owls",
        "and number 0",
        "a bare one",
        "one more",
    ]
    assert not [o for o in kernel.cell_outputs(cell) if o["output_type"] == "execute_result"]


HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> [a](javascript:alert(3)) "
    "[b](JaVaScRiPt&#58;alert(4)) ![c](data:image/svg+xml;base64,PHN2Zz4=) "
    "[d](javascript\\:alert(5)) [e](javascript&colon;alert(6)) [f](ms-msdt:/id%20x) "
    "![track](https://evil.example/pixel.png?d=1) ![ref][r] <https://evil.example/auto>\n\n"
    "[r]: https://evil.example/ref.png\n"
)


def _unsafe_markdown(markdown: str) -> list[str]:
    """What a Markdown renderer that allows HTML would run or fetch in ``markdown``."""
    from markdown_it import MarkdownIt

    from nbagent.notebook.shown.render import NO_MATH_CLASS

    ours = {f'<div class="{NO_MATH_CLASS}">', "</div>"}
    found: list[str] = []

    def walk(tokens: list) -> None:
        for token in tokens:
            if token.type == "html_block" and token.content.strip() in ours:
                continue  # nbagent's own wrapper that keeps MathJax off the text
            if token.type in ("html_block", "html_inline", "image"):
                found.append(f"{token.type}: {token.content or token.attrGet('src')}")
            href = token.attrGet("href") if token.type == "link_open" else None
            # a browser decodes the attribute, drops tabs and newlines from a URL, and keeps
            # %-escapes (no scheme then); only http(s) and mailto may remain
            bare = re.sub(r"[\t\n\r]", "", html.unescape(str(href or ""))).strip().lower()
            scheme = re.match(r"([a-z][a-z0-9+.\-]*):", bare)
            if scheme and scheme.group(1) not in ("http", "https", "mailto"):
                found.append(f"link: {href}")
            walk(token.children or [])

    walk(MarkdownIt("commonmark", {"html": True}).parse(markdown))
    return found


def test_saved_markdown_runs_nothing_and_fetches_nothing(kernel: Kernel) -> None:
    """Model text and a tool's Markdown result holding HTML, script links and images: the saved
    text/markdown form (read by renderers without HTML, and trusted in a live session) neither
    runs script nor makes a viewer's browser fetch an address the model wrote."""
    tools = textwrap.dedent(
        f"""
        class Page:
            def _repr_markdown_(self):
                return {HOSTILE!r}
            def __str__(self):
                return "a page"

        @tool
        def read_page() -> object:
            \"\"\"Read a page.\"\"\"
            return Page()
        """
    )
    setup_run(kernel, f"[Turn({HOSTILE!r}, Call('read_page')), {HOSTILE!r}]", tools=tools)
    cell = kernel.submit("%agent --new --approve auto read it")
    kernel.finish(cell)
    markdown = [
        o["data"]["text/markdown"]
        for o in kernel.cell_outputs(cell)
        if "text/markdown" in o.get("data", {})
    ]
    assert markdown and any("evil.example/pixel.png" in m for m in markdown)
    for text in markdown:
        assert not _unsafe_markdown(text), text
    # what `jupyter nbconvert --to html` makes of the saved cell (it renders text/markdown
    # with its own Markdown renderer where no text/html sits beside it)
    import nbformat
    from nbconvert import HTMLExporter

    only_markdown = [
        {**o, "data": {k: v for k, v in o["data"].items() if k != "text/html"}}
        for o in kernel.cell_outputs(cell)
        if "text/markdown" in o.get("data", {})
    ]
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("%agent read it", outputs=only_markdown)]
    )
    page, _ = HTMLExporter().from_notebook_node(nbformat.from_dict(notebook))
    for href in re.findall(r"""href\s*=\s*["']([^"']*)""", page):
        bare = re.sub(r"[\t\n\r]", "", html.unescape(href)).strip().lower()
        scheme = re.match(r"([a-z][a-z0-9+.\-]*):", bare)
        assert not scheme or scheme.group(1) in ("http", "https", "mailto"), href


def test_a_damaged_recording_says_why_the_run_failed(kernel: Kernel, tmp_path: Path) -> None:
    """A recording truncated (or edited into nonsense) beside the notebook: the run that would
    replay it fails, and its saved output says why (it said only "failed · 0 steps")."""
    setup_run(kernel, "['Fine.']")
    kernel.execute(f"import os; os.environ['NBAGENT_RECORDINGS'] = {str(tmp_path)!r}")
    kernel.execute("%agent --new --record --approve auto hello there")
    (saved,) = tmp_path.glob("*.json")
    saved.write_text(saved.read_text()[:300])
    kernel.execute("nbagent.notebook.current_session().set_model(None)")  # offline: replays
    cell = kernel.submit("%agent --new hello there")
    record = wait_ended(kernel, cell)  # (in the background on kernels older than 7.4)
    assert record["stop_reason"] == "failed"
    for mime in ("text/plain", "text/markdown", "text/html"):
        assert "not valid JSON (truncated?)" in kernel.cell_text(cell, mime), mime
    assert "RecordingError" in str(record["error"])
    for mime in ("text/plain", "text/markdown", "text/html"):  # the file, not where it lives
        shown = kernel.cell_text(cell, mime)
        assert saved.name in shown and str(tmp_path) not in shown, mime
    kernel.execute("%agent --new --live --approve auto and now?")  # the session goes on


def test_a_model_set_during_a_background_run_is_the_next_runs(kernel: Kernel) -> None:
    """`%agent -m offline …` while a run waits in the background for a click: the waiting run
    keeps its model, and the new run uses the new one (the running run's end put the old model
    back, so the new run used it while %agent config named the new one)."""
    since = setup_run(
        kernel,
        '[Turn("Deleting.", Call("delete_file", {"path": "a"})), "Deleted a.", "Unused."]',
    )
    kernel.execute("if True:\n    %agent --new -o first Delete a")  # in the background
    second = kernel.submit("%agent -m offline -o second hello")
    approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.click(approve[0])
    kernel.finish(second)
    ended = "type(second).__name__ == 'RunResult'"  # (a PendingRun first on older kernels)
    kernel.wait_for(lambda: kernel.eval(ended), what="the second run's end")
    assert kernel.eval("first.text") == "Deleted a."
    assert kernel.eval("second.text") != "Deleted a."
    generator = "type(nbagent.notebook.current_session().agent.generator).__name__"
    assert kernel.eval(generator) == "OfflineModel"


def test_after_unload_ext_a_run_says_why_it_is_in_the_background(kernel: Kernel) -> None:
    """The magic stays after %unload_ext (IPython keeps magics); a run then cannot be awaited,
    and the cell says so instead of calling the line 'not at the top level'."""
    since = setup_run(kernel, '[Turn(Call("delete_file", {"path": "a"})), "Done.", "Back."]')
    try:
        kernel.execute("%unload_ext nbagent")
        cell = kernel.submit("%agent --new Delete a")
        kernel.finish(cell)
        said = kernel.cell_text(cell)
        assert "not loaded" in said and "not at the top level" not in said
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        kernel.click(approve[0])
        kernel.wait_for(lambda: run_record(kernel, cell), what="the run's end")
    finally:
        kernel.execute("%load_ext nbagent")
    again = kernel.submit("%agent --new -o back --approve auto hi\nprint(back.text)")
    kernel.finish(again)
    assert "Back." in kernel.cell_text(again)  # awaited again: the next line had the result


def test_the_kernels_own_key_of_any_shape_never_reaches_outputs(
    kernel_python: str, tmp_path: Path
) -> None:
    """An OpenAI-compatible server may take any token as its key: a tool that reads it from the
    environment, or a model that repeats it, shows *** in the widgets and the saved outputs."""
    local_key = "letmein-local-2024"
    kernel = start_kernel(kernel_python, tmp_path, kernel_env(NBAGENT_API_KEY=local_key))
    try:
        kernel.execute("%load_ext nbagent\nimport nbagent.notebook\nfrom nbagent import tool")
        tools = textwrap.dedent(
            """
            import os

            @tool
            def show_settings() -> str:
                \"\"\"Show the settings.\"\"\"
                return "key=" + os.environ["NBAGENT_API_KEY"]
            """
        )
        since = setup_run(
            kernel, f"[Turn('Using {local_key}.', Call('show_settings')), 'Done.']", tools=tools
        )
        cell = kernel.submit("%agent --new --approve auto show me the settings")
        kernel.finish(cell)
        assert run_record(kernel, cell)
        for comm_id in list(kernel.widgets)[since:]:
            assert local_key not in json.dumps(kernel.widgets[comm_id])
        saved = json.dumps(kernel.cell_outputs(cell), ensure_ascii=False)
        assert local_key not in saved and "key=***" in saved
    finally:
        kernel.shutdown()


def test_an_infinite_approval_timeout_is_no_crash(kernel: Kernel) -> None:
    """`%agent approval-timeout inf` (or 1e400) passed the subcommand's check and then raised
    a bare ValueError with a traceback; like `-5` it is no timeout: the usage, nothing sent."""
    setup_run(kernel, "['A prompt after all.', 'Again.']")
    for line in ("%agent approval-timeout inf", "%agent approval-timeout 1e400"):
        cell = kernel.submit(f"%agent approval-timeout 5\n{line}")
        kernel.finish(cell, allow_errors=True)
        reply = kernel.replies[cell]["content"]
        assert reply["ename"] == "UsageError", line
        assert "is not a positive number of seconds" in reply["evalue"]
    assert kernel.eval("nbagent.notebook.current_session().approval_timeout") == 5.0
    assert kernel.eval("len(model.requests)") == 0
    kernel.execute("%agent approval-timeout off")


def test_agent_inside_time_capture_and_run_cell(kernel: Kernel) -> None:
    """A running cell that transforms code itself (%%time, %time, %%capture, run_cell) cannot
    compile or run `await`: it got a SyntaxError or 'event loop is already running'; the line
    now runs the magic's plain form there, and x = … still gets the result."""
    setup_run(kernel, "['Timed.', 'Line.', 'Captured.', 'Nested.', 'Assigned.']")
    cells = [
        "%%time\n%agent --new --approve auto time the cell",
        "%time %agent --approve auto time the line",
        "%%capture captured\n%agent --approve auto capture it",
        "get_ipython().run_cell('%agent --approve auto from run_cell')",
        "%%time\nr = %agent --approve auto assigned\nprint('r:', r.text)",
    ]
    for code in cells:
        cell = kernel.submit(code)
        kernel.finish(cell, allow_errors=True)
        reply = kernel.replies[cell]["content"]
        assert reply["status"] == "ok", (code, reply.get("ename"), reply.get("evalue"))
    assert "r: Assigned." in kernel.cell_text(cell)
    assert kernel.eval("len(captured.outputs)") >= 1
    prompts = "[m.text for m in nbagent.notebook.current_session().agent.messages[1::2]]"
    assert kernel.eval(prompts) == ["Timed.", "Line.", "Captured.", "Nested.", "Assigned."]


def test_an_interrupted_runs_error_names_it_without_the_key_in_its_prompt(kernel: Kernel) -> None:
    """The KeyboardInterrupt (and RunNotFinishedError) of a run quote its prompt: a notebook
    saves that error with the cell."""
    if not in_cell(kernel):
        pytest.skip("before ipykernel 7.4 such a run goes on in the background: no interrupt")
    since = setup_run(kernel, '[Turn(Call("delete_file", {"path": "a"})), "Done."]')
    cell = kernel.submit(f"%agent --new use {KEY} to delete a")
    kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.km.interrupt_kernel()
    kernel.finish(cell, allow_errors=True, timeout=30)
    reply = kernel.replies[cell]["content"]
    assert reply["ename"] == "KeyboardInterrupt" and "use ***" in reply["evalue"]
    # (the traceback quotes the cell's own source, which holds what the person typed)
    errors = [m["content"]["evalue"] for m in kernel.iopub if m["msg_type"] == "error"]
    assert errors and not _leaks(json.dumps([reply["evalue"], *errors], ensure_ascii=False))


def test_a_pasted_long_prompt_is_saved_whole_once(kernel: Kernel) -> None:
    """A %%agent cell with a long document pasted in: the HTML keeps it all, the Markdown and
    text twins are cut like a long answer is (each held all 200 KB again)."""
    setup_run(kernel, "['Summarised.']")
    document = "lorem ipsum dolor sit amet " * 8000
    cell = kernel.submit(f"%%agent --new --approve auto\nSummarise this:\n{document}")
    kernel.finish(cell)
    (output,) = [o for o in kernel.cell_outputs(cell) if "text/html" in o.get("data", {})]
    data = output["data"]
    assert len(data["text/html"]) > len(document)
    assert len(data["text/markdown"]) < 10_000 and len(data["text/plain"]) < 10_000
    assert "more characters" in data["text/plain"] and "Summarised." in data["text/plain"]


@pytest.mark.parametrize("raised", ["KeyboardInterrupt('from the tool')", "SystemExit(3)"])
def test_a_tool_raising_an_interrupt_or_exit_ends_the_cell_as_interrupted(
    kernel: Kernel, raised: str
) -> None:
    """Ctrl-C and sys.exit() inside a tool keep their meaning in a cell: the run stops with every
    call answered, the cell fails as an interrupted cell does (Run All stops there), in one
    line naming the tool, and the kernel lives on for the next run."""
    tools = f"""
        @tool
        def halt() -> str:
            \"\"\"Stop everything.\"\"\"
            raise {raised}
        """
    setup_run(kernel, '[Turn(Call("halt", {})), "not reached", "next answer"]', tools=tools)
    cell = kernel.submit("%agent --new --approve auto halt please\nprint('NOT REACHED')")
    kernel.finish(cell, allow_errors=True)
    reply = kernel.replies[cell]["content"]
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(reply["traceback"]))
    name = raised.split("(")[0]
    assert shown.startswith("KeyboardInterrupt: run-") and f"tool 'halt' raised {name}" in shown
    assert "\n" not in shown, shown
    assert "NOT REACHED" not in kernel.cell_text(cell)
    record = kernel.wait_for(lambda: run_record(kernel, cell), what="the static output")
    assert record["stop_reason"] == "failed"
    messages = "nbagent.notebook.current_session().agent.messages"
    assert kernel.eval(f"[type(m).__name__ for m in {messages}]") == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
    ]
    after = kernel.submit("%agent --approve auto -o nxt hello\nprint(nxt.text)")
    kernel.finish(after)
    assert "not reached" in kernel.cell_text(after)  # the script's next turn: a valid history


# --- the person's objects are code -------------------------------------------------------------

#: Objects a namespace may hold, each hostile in one way; ``gate`` is released by the test.
HOSTILE_OBJECTS = textwrap.dedent(
    """
    import pathlib, threading, weakref

    gate = threading.Event()
    len_called = threading.Event()

    class SlowList(list):
        def __len__(self):
            len_called.set()
            gate.wait(600)  # blocks in C, as time.sleep would
            return 0

    class Liar:
        __class__ = property(lambda self: list)  # isinstance(liar, list) says True
        def __len__(self):
            len_called.set()
            gate.wait(600)
            return 0

    class Thing:
        pass

    class Raises:
        def __repr__(self):
            raise ValueError("no repr for you")

    class Spins:
        def __init__(self, where):
            self.where = pathlib.Path(where)
        def __repr__(self):
            (self.where / "spinning").touch()
            try:
                while True:
                    pass
            except KeyboardInterrupt:
                (self.where / "interrupted").touch()
                raise
    """
)
#: One of each, in the namespace (a test that makes them deletes them when it ends).
HOSTILE_NAMES = textwrap.dedent(
    """
    slow = SlowList([1, 2])
    liar = Liar()
    _thing = Thing()
    ghost = weakref.proxy(_thing)
    del _thing
    """
)


def _kernel_turns(*calls: tuple[str, dict[str, object]], end: str = "Done.") -> str:
    turns = [f"Turn(Call({name!r}, {arguments!r}))" for name, arguments in calls]
    return f"[{', '.join([*turns, repr(end)])}]"


def _results(kernel: Kernel) -> list[str]:
    """The text of every tool result the model read, in order."""
    return list(
        kernel.eval(
            "[r.text for m in nbagent.notebook.current_session().agent.messages"
            " if type(m).__name__ == 'ToolMessage' for r in m.results]"
        )
    )


def _limits(kernel: Kernel, **limits: float) -> None:
    """The session's kernel toolkit with these KernelLimits, until :func:`_default_toolkit`."""
    kernel.execute(
        "from nbagent import KernelLimits\nfrom nbagent.kernel import KernelToolkit\n"
        "nbagent.notebook.current_session().kernel = KernelToolkit(\n"
        f"    shell=get_ipython(), limits=KernelLimits(**{limits!r}))"
    )


def _default_toolkit(kernel: Kernel) -> None:
    kernel.execute("nbagent.notebook.current_session().kernel = None")


def test_objects_that_block_lie_or_died_never_hold_the_kernel_tools(kernel: Kernel) -> None:
    """A list subclass whose __len__ blocks (named by a snippet or not), an object faking
    __class__, and a dead weak proxy: every snippet, the list and the descriptions come back
    while the blocking __len__ was never called, with no ReferenceError anywhere."""
    calls = (
        ("run_python", {"code": "y = 1"}),
        ("list_variables", {}),
        ("describe_variable", {"name": "ghost"}),
        ("describe_variable", {"name": "liar"}),
        ("run_python", {"code": "slow.append(3)\nghost_seen = type(ghost).__name__"}),
    )
    setup_run(kernel, _kernel_turns(*calls), tools=HOSTILE_OBJECTS + HOSTILE_NAMES)
    try:
        cell = kernel.submit("%agent --new --kernel --approve auto look around")
        record = wait_ended(kernel, cell)
        assert record["stop_reason"] == "finished"
        assert kernel.eval("len_called.is_set()") is False
        ran, listed, ghost, liar, named = _results(kernel)
        assert "+y = 1" in ran
        assert "slow: SlowList (2 items)" in listed and "ghost: weakref.ProxyType" in listed
        assert ghost.startswith("ghost: weakref.ProxyType") and liar.startswith("liar: Liar")
        assert "slow changed in place (SlowList (3 items))" in named
        assert "+ghost_seen = 'ProxyType'" in named
        for text in (ran, listed, ghost, liar, named):
            assert "ReferenceError" not in text and "could not run" not in text, text
    finally:
        kernel.execute("gate.set()\ndel slow, liar, ghost")


def test_a_repr_that_raises_is_said_once_with_no_traceback_in_the_cell(kernel: Kernel) -> None:
    """The last value's repr raises: the card and the model say so; IPython's formatter used
    to print the traceback into the %agent cell as well."""
    setup_run(
        kernel,
        _kernel_turns(("run_python", {"code": "Raises()"})),
        tools=HOSTILE_OBJECTS,
    )
    start = len(kernel.iopub)
    cell = kernel.submit("%agent --new --kernel --approve auto show it")
    record = wait_ended(kernel, cell)
    assert record["stop_reason"] == "finished"
    errors = [m for m in kernel.iopub[start:] if m["msg_type"] == "error"]
    assert not errors, errors[0]["content"]["evalue"]
    (said,) = _results(kernel)
    assert "Out: <Raises: its repr raised ValueError: no repr for you>" in said
    assert "its repr raised ValueError" in kernel.cell_text(cell)


def test_stop_reaches_a_repr_that_never_returns(kernel: Kernel, tmp_path: Path) -> None:
    """The last value's repr spins (a read timeout far away): Stop ends the run and interrupts
    the repr too; it spun on after the run had ended."""
    setup_run(
        kernel,
        _kernel_turns(("run_python", {"code": f"Spins({str(tmp_path)!r})"})),
        tools=HOSTILE_OBJECTS,
    )
    _limits(kernel, read_timeout=600)
    since = kernel.mark()
    try:
        cell = kernel.submit("%agent --new --kernel show it")  # asks: the cell takes clicks
        approve = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
        kernel.click(approve[0])
        kernel.wait_for(lambda: (tmp_path / "spinning").exists(), what="the repr spinning")
        kernel.click(kernel.wait_for(lambda: kernel.buttons("Stop", enabled=True, since=since))[0])
        record = wait_ended(kernel, cell)
        assert record["stop_reason"] == "cancelled"
        kernel.wait_for(lambda: (tmp_path / "interrupted").exists(), what="the repr stopped")
    finally:
        _default_toolkit(kernel)
    kernel.execute("model.add('after')")
    again = kernel.submit("%agent --kernel --approve auto still there?")
    assert wait_ended(kernel, again)["stop_reason"] == "finished"


def test_describe_ends_a_repr_that_never_returns(kernel: Kernel, tmp_path: Path) -> None:
    """describe_variable of an object whose repr spins answers within the read timeout, saying
    so, and the repr was interrupted (its thread had spun on after the tool gave up)."""
    calls = (("describe_variable", {"name": "spinner"}), ("list_variables", {}))
    setup_run(
        kernel,
        _kernel_turns(*calls),
        tools=HOSTILE_OBJECTS + f"\nspinner = Spins({str(tmp_path)!r})\n",
    )
    _limits(kernel, read_timeout=0.5)
    try:
        cell = kernel.submit("%agent --new --kernel --approve auto describe it")
        record = wait_ended(kernel, cell)
    finally:
        _default_toolkit(kernel)
    assert record["stop_reason"] == "finished"
    described, listed = _results(kernel)
    assert "value: <Spins: its repr did not answer: it did not finish within 0.5 s>" in described
    assert (tmp_path / "interrupted").exists()
    assert "spinner: Spins" in listed


def test_an_in_place_change_shows_before_and_now_in_the_card(kernel: Kernel) -> None:
    """`xs.append(3)` on a 2-item list: the Namespace table's before column says 2 items (both
    columns said 3)."""
    setup_run(
        kernel, _kernel_turns(("run_python", {"code": "xs.append(3)"})), tools="xs = [1, 2]\n"
    )
    cell = kernel.submit("%agent --new --kernel --approve auto append")
    wait_ended(kernel, cell)
    shown = re.sub(r"<[^>]+>", " ", kernel.cell_text(cell, "text/html"))  # the table's cells
    assert re.search(r"xs\s+changed in place\s+list \(2 items\)\s+list \(3 items\)", shown), shown


def test_a_snippet_that_moves_the_process_says_so_and_its_recording_stays(
    kernel: Kernel, tmp_path: Path
) -> None:
    """os.chdir, sys.path, an environment variable and an import in a snippet: its result
    names each (the variable's value never), and the run's recording is saved in the folder
    the run started in, not where the snippet went."""
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    (tmp_path / "nbagent_probe_kernel.py").write_text("VALUE = 1\n")
    code = (
        "import os, sys\n"
        f"sys.path.append({str(tmp_path)!r})\n"
        "import nbagent_probe_kernel\n"
        f"os.chdir({str(elsewhere)!r})\n"
        f"os.environ['PROBE_API_KEY'] = {KEY!r}\n"
    )
    setup_run(kernel, _kernel_turns(("run_python", {"code": code})))
    kernel.execute(
        "import os, sys\n_cwd, _path = os.getcwd(), list(sys.path)\n"
        "_recordings = os.environ.pop('NBAGENT_RECORDINGS')\n"
        f"os.chdir({str(start)!r})"
    )
    try:
        cell = kernel.submit("%agent --new --record --kernel --approve auto wander off")
        record = wait_ended(kernel, cell)
        assert record["stop_reason"] == "finished"
        (said,) = _results(kernel)
    finally:
        kernel.execute(
            "os.chdir(_cwd)\nsys.path[:] = _path\nos.environ['NBAGENT_RECORDINGS'] = _recordings\n"
            "os.environ.pop('PROBE_API_KEY', None)\nsys.modules.pop('nbagent_probe_kernel', None)"
        )
    assert f"Process: working directory is now {elsewhere}" in said
    assert f"sys.path: added '{tmp_path}'" in said
    assert "environment variables: set PROBE_API_KEY (values not shown)" in said
    assert "imported nbagent_probe_kernel" in said
    assert not _leaks(said) and not _leaks(json.dumps(kernel.cell_outputs(cell)))
    assert list((start / "nbagent-recordings").glob("*.json"))
    assert not (elsewhere / "nbagent-recordings").exists()
