"""What the course policy says in a real kernel, as a person reads it: ``%agent policy`` and a
refusal show the teacher's globs and words exactly as written (a ``*`` stays a star, a
backtick a backtick), the rule a refusal names is code, and ``%agent report`` shows it so; a
``[[notebooks]]`` glob names the same notebooks in every student's folder as in the course's
own, in the kernel and in the class report alike."""

from __future__ import annotations

import html as html_module
import re
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from ..course.gateway import Gateway
from .kernel import Kernel
from .test_kernel_course import course, gateway

__all__ = ["gateway"]  # the fixture, shared with test_kernel_course

RENDER = MarkdownIt("commonmark").render


def _markdown(kernel: Kernel, line: str) -> tuple[str, str]:
    msg_id = kernel.submit(line)
    kernel.finish(msg_id, allow_errors=True)
    shown = [o for o in kernel.cell_outputs(msg_id) if "text/markdown" in o.get("data", {})]
    return shown[-1]["data"]["text/markdown"], shown[-1]["data"]["text/plain"]


def _text(rendered: str) -> str:
    return html_module.unescape(re.sub(r"<[^>]+>", "", rendered))


def test_agent_policy_shows_the_globs_and_the_message_as_written(
    kernel: Kernel, tmp_path: Path
) -> None:
    course(
        kernel,
        tmp_path,
        """
        models = ["openai:gpt-4.1-*", "anthropic:claude-*-latest"]
        [[notebooks]]
        match = "exams/*.ipynb"
        ai = false
        message = "exam_1 is *yours* alone: no `%agent`"
        """,
        notebook="exams/final.ipynb",
    )
    markdown, plain = _markdown(kernel, "%agent policy")
    rendered = RENDER(markdown)
    assert "<em>" not in rendered, rendered
    shown = _text(rendered)
    assert '["openai:gpt-4.1-*", "anthropic:claude-*-latest"]' in shown, shown
    assert "exam_1 is *yours* alone: no `%agent`" in shown
    assert '["openai:gpt-4.1-*", "anthropic:claude-*-latest"]' in plain


def test_a_refusal_names_its_rule_as_code_and_the_report_shows_it_so(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    course(kernel, tmp_path, 'models = ["openai:gpt-4.1-*"]\n')
    markdown, _ = _markdown(kernel, "%agent -m openai:gpt-4o --new hello")
    rendered = RENDER(markdown)
    assert "<code>models = [&quot;openai:gpt-4.1-*&quot;]</code>" in rendered, rendered
    assert "the course allows openai:gpt-4.1-* (rule" in _text(rendered)
    assert "<em>" not in rendered
    report = kernel.submit("%agent report")
    kernel.finish(report)
    (output,) = [o for o in kernel.cell_outputs(report) if o["output_type"] == "display_data"]
    page: Any = output["data"]["text/html"]
    assert "<code>models = [&quot;openai:gpt-4.1-*&quot;]</code>" in page, page
    assert "`models" not in page
    assert gateway.requests == []


def _report(outputs: list[dict[str, Any]], tmp: Path, source: str) -> Any:
    import nbformat

    from nbagent.course import read_class

    nb = nbformat.v4.new_notebook()
    made = nbformat.v4.new_code_cell(source)
    made.outputs = [nbformat.from_dict(o) for o in outputs]
    nb.cells = [made]
    path = tmp / "alice" / "hw.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    (row,) = read_class([tmp])
    return row


def _edited(outputs: list[dict[str, Any]], form: str) -> list[dict[str, Any]]:
    """The outputs with the answer changed in one form, the record left alone (as a student
    editing the saved file would)."""
    import copy

    changed = copy.deepcopy(outputs)
    for output in changed:
        if form == "text":
            record = output.get("metadata", {}).get("nbagent", {})
            if "provenance" in record:
                record["text"] = record["text"].replace("Four", "Five")
        elif form in output.get("data", {}):
            value = output["data"][form]
            value = "".join(value) if isinstance(value, list) else value
            output["data"][form] = value.replace("Four", "Five")
    assert changed != outputs, form
    return changed


def test_an_answer_edited_in_any_form_the_cell_shows_is_flagged(
    kernel: Kernel, gateway: Gateway, tmp_path: Path
) -> None:
    from ..providers import wire
    from .test_kernel_course import run

    course(kernel, tmp_path, 'models = ["openai:gpt-4.1-*"]\n')
    gateway.sse(wire.openai_text("Four, said *twice*: `4`."))
    source = "%agent -m openai:gpt-4.1-mini --new what is 2 + 2?"
    _, record, outputs = run(kernel, source)
    assert record is not None and record.shown is not None
    assert set(record.shown) >= {"text/plain", "text/html", "text/markdown", "text"}
    untouched = _report(outputs, tmp_path / "untouched", source)
    assert untouched.flags == "" and untouched.runs == 1, untouched
    for form in ("text/plain", "text/html", "text/markdown", "text"):
        row = _report(_edited(outputs, form), tmp_path / form.replace("/", "-"), source)
        assert row.flag_list == ["output_mismatch"], (form, row)
        said = "the run's own record" if form == "text" else form
        assert f"({said}) is not what the run showed" in row.problems, row.problems
    # an output of the run taken away (the answer's, say) is noticed too
    kept = [o for o in outputs if "Four" not in str(o.get("data", {})) or "provenance" in str(o)]
    if len(kept) < len(outputs):
        row = _report(kept, tmp_path / "removed", source)
        assert "output_mismatch" in row.flag_list, row
