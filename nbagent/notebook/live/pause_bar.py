"""PauseBar: a step-mode pause in the run view — what is about to happen, and Next, Run to end,
Stop; before a model request also what the person may change first.

The bar answers the pause through the run's approver (``InteractiveApprover.resume``), as the
approval bar answers a call: a click settles the pause once, from any thread, and a click on a
bar whose pause is over does nothing. An edit is checked first (``StepPause.check``): one that would
break the history (a result left out, a result of a call the model is not about to read) is
refused in the bar, saying why, and the run keeps waiting.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ...inspection.stepping import Resume, StepEditError, StepPause
from ...loop._repeats import ordinal
from ...redact import redact_secrets
from ..shown.exchanges import message_html, request_summary
from ..shown.render import shorten
from ..shown.wording import PAUSE_MARK

__all__ = ["PauseBar"]


def _repeat_buttons(pause: StepPause) -> tuple[widgets.Button, widgets.Button, widgets.Button]:
    """Go on, Allow repeats, Stop: what a repeat pause offers."""
    name = pause.calls[0].name if pause.calls else "this tool"
    again = _button(
        "Go on",
        "play",
        f"Make the call; ask again after {pause.repeats} more repeats like these",
        "info",
    )
    allow = _button(
        f"Allow repeats of {name}",
        "check",
        f"Make the call, and let {name} repeat without asking from now on "
        "(a rule: %agent rules shows it, %agent rules remove takes it back)",
    )
    stop = _button("Stop", "stop", "Do not make the call: end the run here", "danger")
    return again, allow, stop


def _button(label: str, icon: str, tooltip: str, style: str = "") -> widgets.Button:
    return widgets.Button(
        description=label,
        icon=icon,
        tooltip=tooltip,
        button_style=style,
        layout=widgets.Layout(width="auto", min_width="fit-content"),
    )


class PauseBar:
    """The widgets of one pause; ``answer(resume)`` is where the bar's resume goes."""

    def __init__(self, pause: StepPause, answer: Callable[[Resume], bool]) -> None:
        self.pause = pause
        self._answer = answer
        self._lock = threading.Lock()
        self.done = False
        self.header = widgets.HTML(self._header())
        if pause.kind == "repeat":
            self.next, self.run, self.stop = _repeat_buttons(pause)
        else:
            self.next = _button(
                "Next", "step-forward", "Go on, and pause again at the next step", "info"
            )
            self.run = _button("Run to end", "forward", "Go on to the end without pausing")
            self.stop = _button(
                "Stop", "stop", "End the run here (every call is answered)", "danger"
            )
        self.notice = widgets.HTML("", layout=widgets.Layout(display="none"))
        self.fields: dict[str, widgets.Widget] = {}
        self.removes: dict[str, widgets.Checkbox] = {}
        parts: list[widgets.Widget] = [self.header]
        if pause.kind == "request" and pause.request is not None:
            parts.append(self._request_view())
            self.edit = _button("Edit before sending", "pencil", "Change what the model reads")
            self.edit.on_click(self._on_edit)
            self.form = widgets.VBox([], layout=widgets.Layout(display="none"))
            parts.append(self.form)
        else:
            self.edit = None
            self.form = None
        buttons = [self.next, self.run, self.stop] + ([self.edit] if self.edit else [])
        parts += [widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap")), self.notice]
        self.widget = widgets.VBox(
            parts,
            layout=widgets.Layout(
                border="1px dashed var(--jp-brand-color1, #1976d2)",
                padding="2px 8px",
                margin="4px 0",
            ),
        )
        self.widget.add_class("nbagent-pause")
        self.next.on_click(lambda _b: self._go("next"))
        self.run.on_click(lambda _b: self._go("run"))
        self.stop.on_click(lambda _b: self._go("stop"))

    def _header(self) -> str:
        pause = self.pause
        if pause.kind == "repeat" and pause.calls:
            call = pause.calls[0]
            arguments = shorten(redact_secrets(call.arguments), 200)
            what = (
                f"The model asks for {call.name} {arguments} a {ordinal(pause.repeats + 1)} "
                f"time: the last {pause.repeats} times got nowhere (the same result, or an "
                "error, each time)."
            )
            text = html.escape(what)
            return f"<b>{PAUSE_MARK} The same call again</b> <span>{text}</span>"
        if pause.kind == "request" and pause.request is not None:
            what = (
                f"before the model request of step {pause.step} "
                f"({pause.model or 'model'}: {request_summary(pause.request)})"
            )
        else:
            calls = ", ".join(c.name for c in pause.calls)
            what = f"before running the calls of step {pause.step}: {calls}"
        text = html.escape(redact_secrets(shorten(what, 400)))
        return f'<b>{PAUSE_MARK} Paused</b> <span style="opacity:0.8">{text}</span>'

    def _request_view(self) -> widgets.Widget:
        """The messages the model is about to read that are new (folded: open to see them)."""
        assert self.pause.request is not None
        last = self.pause.request.messages[-1:] if self.pause.request.messages else ()
        body = "".join(message_html(m) for m in last)
        label = "What the model is about to read"
        return widgets.HTML(
            f'<details><summary style="font-size:0.85em;opacity:0.7">{label}</summary>'
            f"{body}</details>"
        )

    def _on_edit(self, _button: Any) -> None:
        if self.form is None or self.fields:
            if self.form is not None:
                shown = self.form.layout.display != "none"
                self.form.layout.display = "none" if shown else ""
            return
        request = self.pause.request
        assert request is not None
        rows: list[widgets.Widget] = []
        for result in self.pause.results:
            text = widgets.Textarea(
                value=redact_secrets(result.text), layout=widgets.Layout(width="100%")
            )
            text.rows = min(8, result.text.count("\n") + 2)
            remove = widgets.Checkbox(value=False, description="remove", indent=False)
            self.fields[f"result:{result.call_id}"] = text
            self.removes[result.call_id] = remove
            label = f"result of {result.name} ({result.call_id}) the model will read"
            rows += [widgets.HTML(f"<small>{html.escape(label)}</small>"), text, remove]
        instructions = widgets.Textarea(
            value=request.instructions or "", layout=widgets.Layout(width="100%")
        )
        self.fields["instructions"] = instructions
        model = widgets.Text(
            value="", placeholder="another model for this request only, e.g. openai:gpt-4.1-mini"
        )
        self.fields["model"] = model
        rows += [
            widgets.HTML("<small>instructions for this request</small>"),
            instructions,
            widgets.HTML("<small>model</small>"),
            model,
        ]
        self.form.children = tuple(rows)
        self.form.layout.display = ""

    def resume(self, action: str) -> Resume:
        """The resume the bar would give now (its edits, if the form was opened)."""
        if action == "stop" or not self.fields:
            return Resume(action, by="person")  # type: ignore[arg-type]
        request = self.pause.request
        results: dict[str, str] = {}
        for result in self.pause.results:
            field = self.fields.get(f"result:{result.call_id}")
            if field is not None and field.value != redact_secrets(result.text):
                results[result.call_id] = field.value
        remove = tuple(c for c, box in self.removes.items() if box.value)
        for call_id in remove:
            results.pop(call_id, None)
        instructions: str | None = self.fields["instructions"].value
        if request is not None and instructions == (request.instructions or ""):
            instructions = None
        model = self.fields["model"].value.strip() or None
        return Resume(
            action,  # type: ignore[arg-type]
            instructions=instructions,
            results=results,
            remove=remove,
            model=model,
            by="person",
        )

    def _go(self, action: str) -> None:
        with self._lock:
            if self.done:
                return
            try:
                resume = self.pause.check(self.resume(action))
            except StepEditError as exc:
                self._say(str(exc))
                return
            if not self._answer(resume):
                self._say("this pause is over (the run went on or ended)")
                self.done = True
                self._disable()
                return
            self.done = True
        self._disable()

    def _say(self, text: str) -> None:
        self.notice.value = f'<span style="color:#e53935">{html.escape(text)}</span>'
        self.notice.layout.display = ""

    def _disable(self) -> None:
        for button in (self.next, self.run, self.stop, self.edit):
            if button is not None:
                button.disabled = True

    def close(self, said: str) -> None:
        """The pause is over: fold the bar into one line saying how it went on (``said``
        begins with :data:`PAUSE_MARK`)."""
        self.done = True
        self._disable()
        self.header.value = f'<span style="opacity:0.75">{html.escape(redact_secrets(said))}</span>'
        for child in self.widget.children[1:]:
            child.layout.display = "none"

    def all_widgets(self) -> list[widgets.Widget]:
        made: list[widgets.Widget] = [self.widget, self.header, self.next, self.run, self.stop]
        made += [self.notice, *self.widget.children, *self.fields.values(), *self.removes.values()]
        if self.edit is not None:
            made.append(self.edit)
        if self.form is not None:
            made += [self.form, *self.form.children]
        return made
