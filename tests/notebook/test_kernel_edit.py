"""Edit, preview, rules, hooks and the approval timeout in a real kernel, driven with the comm
messages a browser sends (clicks, typed text), and the saved outputs they leave."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from .kernel import Kernel
from .test_kernel_approval import in_cell, setup_run, wait_ended

ONE_CALL = '[Turn("I will delete it.", Call("delete_file", {"path": "tmp/a.txt"})), "Done."]'


@pytest.fixture(autouse=True)
def _no_rules_left(kernel: Kernel) -> Iterator[None]:
    """Each test starts with no rules, hooks or timeout, whatever the one before it left."""
    yield
    kernel.execute(
        "%agent rules clear\n%agent approval-timeout off\n"
        "_s = nbagent.notebook.current_session()\n"
        "_s.agent.before_tool_hooks.clear(); _s.agent.after_tool_hooks.clear()"
    )


def printed(messages: list[dict[str, Any]]) -> str:
    """Everything a cell printed, displayed (as text) or raised."""
    parts = []
    for m in messages:
        content = m["content"]
        if m["msg_type"] == "stream":
            parts.append(content["text"])
        elif m["msg_type"] in ("display_data", "execute_result"):
            parts.append(str(content["data"].get("text/plain", "")))
        elif m["msg_type"] == "error":
            parts.append(f"{content['ename']}: {content['evalue']}")
    return "\n".join(parts)


def type_text(kernel: Kernel, since: int, old: str, new: str) -> None:
    """Find the form's text box showing ``old`` and type ``new`` into it."""
    (box,) = kernel.wait_for(lambda: kernel.widget_ids("TextModel", since=since, value=old))
    kernel.type_into(box, new)


def test_edit_then_approve_runs_the_edit(kernel: Kernel) -> None:
    since = setup_run(kernel, ONE_CALL)
    cell = kernel.submit("%agent --new Delete it")
    (edit,) = kernel.wait_for(lambda: kernel.buttons("Edit", enabled=True, since=since))
    kernel.click(edit)
    type_text(kernel, since, "tmp/a.txt", "tmp/b.txt")
    (approve,) = kernel.buttons("Approve", enabled=True, since=since)
    kernel.click(approve)
    record = wait_ended(kernel, cell)
    assert kernel.eval("ran") == ["tmp/b.txt"]
    sent = kernel.eval("model.requests[1].messages[-1].results[0].text")
    assert "changed before it ran (by the person who approved it)" in sent
    assert '{"path": "tmp/b.txt"}' in sent and sent.endswith("deleted tmp/b.txt")
    call = record["calls"][0]
    assert call["proposed_arguments"] == {"path": "tmp/a.txt"}
    assert call["executed_arguments"] == {"path": "tmp/b.txt"}
    assert call["changes"] == [{"by": "person", "hook": None, "arguments": {"path": "tmp/b.txt"}}]
    assert call["approval"]["approved"] is True
    html = kernel.cell_text(cell, "text/html")
    assert "approved by you with your edit" in html
    assert "by you: /path &quot;tmp/a.txt&quot; → &quot;tmp/b.txt&quot;" in html


def test_an_edit_that_does_not_fit_says_why_and_waits(kernel: Kernel) -> None:
    tools = '''
        @tool(needs_approval=True, schema={
            "type": "object",
            "properties": {"path": {"type": "string", "pattern": "^tmp/"}},
            "required": ["path"],
        })
        def delete_file(path):
            """Delete a file under tmp/."""
            ran.append(path)
            return f"deleted {path}"
    '''
    since = setup_run(kernel, ONE_CALL, tools=tools)
    cell = kernel.submit("%agent --new Delete it")
    (edit,) = kernel.wait_for(lambda: kernel.buttons("Edit", enabled=True, since=since))
    kernel.click(edit)
    type_text(kernel, since, "tmp/a.txt", "/etc/passwd")
    (approve,) = kernel.buttons("Approve", enabled=True, since=since)
    kernel.click(approve)
    kernel.wait_for(
        lambda: [t for t in kernel.html_texts(since) if "do not fit" in t and "/path" in t],
        what="the inline error",
    )
    # nothing was decided: the bar still waits (the kernel answers no eval while the cell runs)
    assert kernel.buttons("Approve", enabled=True, since=since) == [approve]
    (box,) = kernel.widget_ids("TextModel", since=since, value="/etc/passwd")
    kernel.type_into(box, "tmp/c.txt")
    kernel.click(approve)
    wait_ended(kernel, cell)
    assert kernel.eval("ran") == ["tmp/c.txt"]


def test_a_preview_shows_while_the_call_waits_and_deny_still_works(kernel: Kernel) -> None:
    tools = '''
        def rows(arguments):
            return f"would delete {arguments['path']} (12 lines)"

        @tool(needs_approval=True, preview=rows)
        def delete_file(path: str) -> str:
            """Delete a file."""
            ran.append(path)
            return f"deleted {path}"
    '''
    since = setup_run(kernel, ONE_CALL, tools=tools)
    cell = kernel.submit("%agent --new Delete it")
    kernel.wait_for(
        lambda: "would delete tmp/a.txt (12 lines)" in kernel.all_output_text(since),
        what="the preview",
    )
    (deny,) = kernel.buttons("Deny", enabled=True, since=since)
    kernel.click(deny)
    wait_ended(kernel, cell)
    assert kernel.eval("ran") == []
    assert "would delete tmp/a.txt (12 lines)" in kernel.cell_text(cell, "text/html")


def test_preview_edit_shows_the_edited_arguments_preview_before_approving(kernel: Kernel) -> None:
    tools = '''
        previewed = []

        def rows(arguments):
            previewed.append(arguments["path"])
            return f"would delete {arguments['path']} (12 lines)"

        @tool(needs_approval=True, preview=rows, schema={
            "type": "object",
            "properties": {"path": {"type": "string", "pattern": "^tmp/"}},
            "required": ["path"],
        })
        def delete_file(path):
            """Delete a file under tmp/."""
            ran.append(path)
            return f"deleted {path}"
    '''
    since = setup_run(kernel, ONE_CALL, tools=tools)
    cell = kernel.submit("%agent --new Delete it")
    kernel.wait_for(
        lambda: "would delete tmp/a.txt (12 lines)" in kernel.all_output_text(since),
        what="the model's preview",
    )
    (edit,) = kernel.buttons("Edit", enabled=True, since=since)
    kernel.click(edit)
    type_text(kernel, since, "tmp/a.txt", "/etc/passwd")
    (preview_edit,) = kernel.buttons("Preview edit", enabled=True, since=since)
    kernel.click(preview_edit)
    kernel.wait_for(
        lambda: [t for t in kernel.html_texts(since) if "do not fit" in t and "/path" in t],
        what="the inline error (nothing is previewed for a refused edit)",
    )
    (box,) = kernel.widget_ids("TextModel", since=since, value="/etc/passwd")
    kernel.type_into(box, "tmp/b.txt")
    kernel.click(preview_edit)
    kernel.wait_for(
        lambda: "would delete tmp/b.txt (12 lines)" in kernel.all_output_text(since),
        what="the edit's preview",
    )
    kernel.wait_for(
        lambda: [
            t
            for t in kernel.html_texts(since)
            if "Preview of your edit {&quot;path&quot;: &quot;tmp/b.txt&quot;}" in t
            and "nothing has run yet" in t
        ],
        what="the label naming the edit",
    )
    (approve,) = kernel.buttons("Approve", enabled=True, since=since)
    kernel.click(approve)
    wait_ended(kernel, cell)
    assert kernel.eval("ran") == ["tmp/b.txt"]
    assert kernel.eval("previewed") == ["tmp/a.txt", "tmp/b.txt"]


def test_rules_from_the_magic_decide_and_can_be_removed(kernel: Kernel) -> None:
    since = setup_run(kernel, ONE_CALL)
    out = printed(kernel.execute("%agent allow delete_file path=tmp/*"))
    assert "rule 1: allow delete_file path=tmp/*" in out
    cell = kernel.submit("%agent --new Delete it")
    wait_ended(kernel, cell)
    assert kernel.eval("ran") == ["tmp/a.txt"]  # nobody was asked
    assert kernel.buttons("Approve", since=since) == []
    assert "allowed by rule: allow delete_file path=tmp/*" in kernel.cell_text(cell, "text/html")
    text = printed(kernel.execute("%agent rules"))
    assert "allow delete_file path=tmp/*" in text and "%agent rules remove 1" in text
    text = printed(kernel.execute("%agent config"))
    assert "#1 allow delete_file path=tmp/*" in text and "approval timeout" in text
    bad = printed(kernel.execute("%agent allow delete_file pth=tmp/*", allow_errors=True))
    assert "has no argument 'pth'" in bad
    kernel.execute("%agent deny delete_file path=tmp/a.txt")
    kernel.execute('model.add(Turn(Call("delete_file", {"path": "tmp/a.txt"})), "Done.")')
    again = kernel.submit("%agent --new Delete it")
    record = wait_ended(kernel, again)  # the deny rule wins over the allow rule
    assert kernel.eval("ran") == ["tmp/a.txt"]
    assert record["calls"][0]["approval"]["reason"] == "deny delete_file path=tmp/a.txt"
    kernel.execute("%agent rules remove delete_file")
    assert kernel.eval("len(nbagent.notebook.current_session().rules)") == 0


def test_hooks_show_what_they_changed(kernel: Kernel) -> None:
    since = setup_run(kernel, ONE_CALL)
    kernel.execute(
        textwrap.dedent(
            """
            session = nbagent.notebook.current_session()

            @session.before_tool
            def into_safe(call, arguments):
                return {"path": arguments["path"].replace("tmp/", "safe/")}

            @session.after_tool
            def shout(call, arguments, result):
                return result.text.upper()
            """
        )
    )
    cell = kernel.submit("%agent --new Delete it")
    (approve,) = kernel.wait_for(lambda: kernel.buttons("Approve", enabled=True, since=since))
    kernel.wait_for(
        lambda: [t for t in kernel.html_texts(since) if "by hook into_safe" in t],
        what="the hook's note on the card",
    )
    kernel.click(approve)
    wait_ended(kernel, cell)
    assert kernel.eval("ran") == ["safe/a.txt"]
    assert kernel.eval("model.requests[1].messages[-1].results[0].text").endswith(
        "DELETED SAFE/A.TXT"
    )
    html = kernel.cell_text(cell, "text/html")
    assert "after-tool hook shout rewrote the result" in html
    assert "deleted safe/a.txt" in html  # the person sees the tool's own result
    assert "What the model read instead" in html


def test_the_approval_timeout_setting_answers_the_call(kernel: Kernel) -> None:
    since = setup_run(kernel, ONE_CALL)
    kernel.execute("%agent approval-timeout 1")
    cell = kernel.submit("%agent --new Delete it")
    kernel.wait_for(
        lambda: [t for t in kernel.html_texts(since) if "approval timed out” after 1.0 s" in t],
        what="the timeout on the card",
    )
    record = wait_ended(kernel, cell)
    assert kernel.eval("ran") == []
    assert record["calls"][0]["approval"]["by"] == "timeout"
    assert "approval timed out after 1 s" in kernel.cell_text(cell, "text/html")
    if in_cell(kernel):
        assert record["stop_reason"] == "finished"


def test_tools_table_and_registration_warn_about_provider_rules(kernel: Kernel) -> None:
    # the test kernel has OPENAI_API_KEY set: OpenAI is a configured provider
    out = kernel.execute(
        textwrap.dedent(
            '''
            @tool(schema={"type": "object", "properties": {"tags": {"type": "array"}}})
            def tag(tags):
                """Tag it."""
                return "ok"
            '''
        )
    )
    warned = printed(out)
    assert "OpenAI would reject tool 'tag': an array schema needs `items`" in warned
    text = printed(kernel.execute("%agent tools"))
    assert "OpenAI" in text and "Anthropic" in text
    assert "rejects: an array schema needs `items`" in text
    kernel.execute("del tag")
