"""Tools defined in cells, results shown to a person, and the subcommands, in a real kernel."""

from __future__ import annotations

import textwrap

from .kernel import Kernel


def cell(kernel: Kernel, code: str, **kwargs: bool) -> list[dict]:
    return kernel.execute(textwrap.dedent(code), **kwargs)


def stderr_of(messages: list[dict]) -> str:
    return "".join(
        m["content"]["text"]
        for m in messages
        if m["msg_type"] == "stream" and m["content"]["name"] == "stderr"
    )


def complaint(messages: list[dict]) -> str:
    """What a cell said went wrong: an error, or IPython's "UsageError: ..." on stderr."""
    errors = [
        f"{m['content']['ename']}: {m['content']['evalue']}"
        for m in messages
        if m["msg_type"] == "error"
    ]
    return "\n".join(errors) + stderr_of(messages)


def shown(messages: list[dict], mime: str = "text/plain") -> str:
    return "\n".join(
        str(m["content"]["data"].get(mime, ""))
        for m in messages
        if m["msg_type"] in ("display_data", "execute_result")
    )


def use_model(kernel: Kernel, turns: str) -> int:
    cell(
        kernel,
        f"""
        from nbagent.models import ScriptedModel, Call, Turn
        import nbagent.notebook
        model = ScriptedModel({turns})
        nbagent.notebook.current_session().set_model(model)
        """,
    )
    return kernel.mark()


def finished(kernel: Kernel, since: int, word: str = "finished") -> None:
    kernel.wait_for(lambda: word in kernel.footer(since), what=word)


def test_a_rerun_cell_replaces_its_tool_and_the_new_body_runs(kernel: Kernel) -> None:
    cell(kernel, '@tool\ndef greet(name: str) -> str:\n    """Greet."""\n    return "old " + name')
    cell(kernel, '@tool\ndef greet(name: str) -> str:\n    """Greet."""\n    return "new " + name')
    listed = shown(cell(kernel, "%agent tools"))
    assert listed.count("greet") == 1
    since = use_model(kernel, '[Turn(Call("greet", {"name": "Ada"})), "ok"]')
    cell(kernel, "%agent --new hi")
    finished(kernel, since)
    assert kernel.eval("model.requests[1].messages[-1].results[0].text") == "new Ada"
    # rebinding the name to a plain function removes the tool
    cell(kernel, "def greet(name):\n    return name")
    assert "greet" not in shown(cell(kernel, "%agent tools"))


def test_register_and_rejected_tools_report_in_their_cell(kernel: Kernel) -> None:
    out = cell(
        kernel,
        """
        from nbagent.tools import Tool, Definition
        broken = Tool(name="bad name!", execute=lambda context: 1)
        """,
    )
    assert "'bad name!'" in stderr_of(out) and "was not registered" in stderr_of(out)
    # a schema the strict policy rejects fails in the cell that registers it, naming the pointer
    out = cell(
        kernel,
        """
        nbagent.notebook.register(
            Definition(name="remote", input_schema={"$ref": "https://example.com/s.json"}),
            function=lambda: "x",
        )
        """,
        allow_errors=True,
    )
    errors = [m for m in out if m["msg_type"] == "error"]
    assert errors and errors[0]["content"]["ename"] == "SchemaError"
    assert "remote" in errors[0]["content"]["evalue"]
    # a Definition plus a function works, and shows up in the table with its approval rule
    cell(
        kernel,
        """
        del broken
        nbagent.notebook.register(
            Definition(name="add", description="Add two numbers", input_schema={
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]}),
            function=lambda a, b: a + b,
        )
        """,
    )
    table = shown(cell(kernel, "%agent tools"))
    assert "add" in table and "a: integer*, b: integer*" in table
    since = use_model(kernel, '[Turn(Call("add", {"a": 2, "b": 3})), "five"]')
    cell(kernel, "%agent --new add")
    finished(kernel, since)
    assert kernel.eval("model.requests[1].messages[-1].results[0].text") == "5"


def test_results_render_for_a_person(kernel: Kernel) -> None:
    cell(
        kernel,
        """
        import pandas as pd
        from PIL import Image
        from nbagent.tools import ToolContext

        @tool
        def picture() -> object:
            \"\"\"A red square.\"\"\"
            return Image.new("RGB", (8, 8), "red")

        @tool
        def table() -> object:
            \"\"\"A table.\"\"\"
            return pd.DataFrame({"name": ["<b>x</b>", "y"], "n": [1, 2]})

        @tool
        def broken() -> str:
            \"\"\"Fails.\"\"\"
            raise ValueError("no such thing")

        @tool
        def working(context: ToolContext) -> str:
            \"\"\"Reports progress.\"\"\"
            context.update(0.5)
            context.update("halfway there")
            return "worked"
        """,
    )
    since = use_model(
        kernel,
        '[Turn(Call("picture"), Call("table"), Call("broken"), Call("working")), "shown"]',
    )
    cell(kernel, "%agent --new show me")
    finished(kernel, since)
    outputs = [
        o for cid in kernel.widget_ids("OutputModel", since=since) for o in kernel.outputs_of(cid)
    ]
    pngs = [o for o in outputs if "image/png" in o.get("data", {})]
    assert pngs and pngs[0]["data"]["text/plain"].startswith("[image 8×8")
    tables = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert tables and "&lt;b&gt;x&lt;/b&gt;" in tables[0] and "<b>x</b>" not in tables[0]
    errors = [o["text"] for o in outputs if o.get("output_type") == "stream"]
    assert any("ValueError: no such thing" in e for e in errors)
    assert any("Traceback" in e for e in errors)  # the folded traceback
    accordions = kernel.widget_ids("AccordionModel", since=since)
    assert accordions and kernel.widgets[accordions[0]].get("selected_index") is None
    progress = kernel.widget_ids("FloatProgressModel", since=since)
    assert progress and kernel.widgets[progress[0]]["value"] == 1.0
    labels = kernel.widget_ids("LabelModel", since=since, value="halfway there")
    assert labels


def test_text_from_the_model_and_the_prompt_is_never_html(kernel: Kernel) -> None:
    since = use_model(kernel, '["<img src=x onerror=alert(1)> **bold**"]')
    cell(kernel, "x = '<script>alert(2)</script>'\n%agent --new look at {x}")
    finished(kernel, since)
    html = " ".join(kernel.html_texts(since))
    assert "<script>" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    texts = [kernel.stream_text(c) for c in kernel.streams(since)]
    assert "<img src=x onerror=alert(1)> **bold**" in texts  # raw text: the browser builds DOM
    assert kernel.eval("model.requests[0].messages[-1].text") == (
        "look at <script>alert(2)</script>"
    )


def test_a_crash_outside_the_run_shows_in_the_view(kernel: Kernel) -> None:
    since = use_model(kernel, '["never"]')
    cell(
        kernel,
        """
        from nbagent.tools import Tool
        session = nbagent.notebook.current_session()
        # slipped past registration on purpose: the run's setup must fail, visibly
        session.tools["sneaky"] = Tool(name="sneaky", execute=lambda c: 1,
                                       input_schema={"$id": "x"})
        """,
    )
    cell(kernel, "%agent --new go")
    kernel.wait_for(lambda: "SchemaError" in kernel.all_output_text(since), what="error shown")
    finished(kernel, since, "failed")
    cell(kernel, "session.tools.pop('sneaky')")


def test_subcommands(kernel: Kernel) -> None:
    since = use_model(kernel, '["hello there"]')
    cell(kernel, "%agent --new -o answer say hello")
    finished(kernel, since)
    history = shown(cell(kernel, "%agent history"))
    assert "You: say hello" in history and "Assistant: hello there" in history
    config = shown(cell(kernel, "%agent config"))
    assert "ScriptedModel" in config and "interactive" in config
    assert "no run is in progress" in "".join(
        m["content"].get("text", "") for m in cell(kernel, "%agent stop")
    )
    assert "unknown option --bogus" in complaint(
        cell(kernel, "%agent --bogus hi", allow_errors=True)
    )
    out = cell(kernel, "%agent --tools nope hi", allow_errors=True)
    assert "unknown tools nope" in complaint(out)
    out = cell(kernel, "%agent -m nonsense-model hi", allow_errors=True)
    assert "cannot tell which provider" in complaint(out)
    assert "what should the agent do" in complaint(cell(kernel, "%agent", allow_errors=True))
    assert kernel.eval("answer.text") == "hello there"


def test_cell_magic_prompt_and_tool_subset(kernel: Kernel) -> None:
    cell(kernel, '@tool\ndef ping() -> str:\n    """Ping."""\n    return "pong"')
    since = use_model(kernel, '["multi-line ok"]')
    cell(kernel, "%%agent --new --tools ping --max-steps 1\nfirst line\nsecond line")
    finished(kernel, since)
    request = "model.requests[0]"
    assert kernel.eval(f"{request}.messages[-1].text") == "first line\nsecond line"
    assert kernel.eval(f"[d.name for d in {request}.tools]") == ["ping"]


def test_usage_and_a_budget(kernel: Kernel) -> None:
    cell(kernel, "from nbagent.generation import Usage")
    use_model(
        kernel,
        "[Turn(Call('greet', {'name': 'a'}), usage=Usage(100, 20)),"
        " Turn(Call('greet', {'name': 'b'}), usage=Usage(100, 20)), 'done']",
    )
    cell(kernel, '@tool\ndef greet(name: str) -> str:\n    """Greet."""\n    return "hi " + name')
    ran = kernel.submit(
        # only greet: the first request's estimate counts the tools' definitions, and the
        # shared kernel holds the tools earlier tests defined
        "%agent --new --tools greet --approve auto --budget 150 -o spent greet twice\n"
        "print(spent.stop_reason)"
    )
    kernel.finish(ran)
    assert "budget" in kernel.cell_text(ran)
    # the run's own footer says it was cut short and why, not a bare "budget": the second
    # request, expected to use about as much as the first (120), does not fit in the 30 left
    for mime in ("text/plain", "text/markdown", "text/html"):
        said = kernel.cell_text(ran, mime)
        assert "stopped: " in said and "budget of 150 tokens cannot pay for" in said, mime
    table = shown(cell(kernel, "%agent usage"))
    assert "greet twice" in table and "budget" in table and "session" in table
    import re

    assert re.search(r"greet twice\s+scripted\s+1\s+100\s+20\s+budget", table), table
