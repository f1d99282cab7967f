"""Undo keeps its promise, in a real kernel: what the person changed after the agent's step stays,
however small the change in however large an object; what nbagent cannot vouch for is left as
it is, said on the snippet's card and in the undo's report; ``%agent cells`` gives every run."""

from __future__ import annotations

import textwrap

from .kernel import Kernel
from .test_kernel_approval import wait_ended
from .test_kernel_snippets import _start, _turns

OBJECTS = textwrap.dedent(
    """
    import dataclasses
    import numpy as np
    import pandas as pd

    @dataclasses.dataclass
    class Basket:
        items: list

    arr = np.zeros(1_000_000)
    xs = list(range(50_000))
    frame = pd.DataFrame({"a": np.arange(200_000.0), "b": ["x"] * 200_000})
    basket = Basket([1, 2])
    untouched = [1, 2]
    """
)


def test_undo_keeps_one_value_the_person_changed_in_a_large_object(kernel: Kernel) -> None:
    kernel.execute(OBJECTS)
    code = (
        "arr[0] = 5\nxs[0] = -1\nframe.loc[0, 'a'] = -1.0\nbasket.items = [9]\n"
        "untouched.append(3)\nmade = [0] * 10"
    )
    _start(kernel, _turns(code))
    wait_ended(kernel, kernel.submit("%agent --new --kernel --approve auto change them"))
    # the person's own edits after the step: one value each, where no sample looks
    kernel.execute(
        "arr[123457] = 1.0\nxs[12345] = 'mine'\nframe.iloc[150_001, 1] = 'mine'\n"
        "basket.items.append('mine')\nmade[7] = 'mine'"
    )
    undo = kernel.submit("%agent undo")
    kernel.finish(undo)
    said = kernel.cell_text(undo)
    for name in ("arr", "xs", "frame", "basket", "made"):
        assert (
            f"Left as it is: {name}: it was changed in place after the agent's step "
            "(kept your newer value)." in said
        ), said
    assert "Restored: untouched." in said
    assert kernel.eval("(float(arr[123457]), float(arr[0]))") == (1.0, 5.0)
    assert kernel.eval("(xs[12345], xs[0])") == ("mine", -1)
    assert kernel.eval("(frame.iloc[150_001, 1], float(frame.loc[0, 'a']))") == ("mine", -1.0)
    assert kernel.eval("basket.items") == [9, "mine"]
    assert kernel.eval("made[7]") == "mine"
    assert kernel.eval("untouched") == [1, 2]  # what the person did not touch goes back


def test_what_undo_cannot_vouch_for_is_left_and_said_on_the_card_and_in_the_report(
    kernel: Kernel,
) -> None:
    # a copy budget of 1 MB: a 4 MB array is one undo cannot fingerprint
    kernel.execute(
        "import numpy as np\nfrom nbagent import KernelLimits, kernel_tools\n"
        "nbagent.notebook.current_session().kernel = kernel_tools("
        "limits=KernelLimits(copy_budget=1_000_000))\n"
        "label = 'old'"
    )
    code = (
        "import threading\nhandle = {'lock': threading.Lock()}\n"
        "big = np.ones(500_000)\nlabel = 'new'\nsmall = [1, 2]"
    )
    _start(kernel, _turns(code))
    cell = kernel.submit("%agent --new --kernel --approve auto make them")
    wait_ended(kernel, cell)
    card = " ".join(kernel.cell_text(cell, "text/html").split())
    start = card.index("Undo will leave handle")
    note = card[start : card.index("</pre>", start)]
    assert note.startswith("Undo will leave handle (it holds an object of type _thread.lock")
    assert "; big (larger than the budget undo reads for its checks (976.6 KB" in note
    assert note.endswith("as they are: nbagent cannot tell whether they change after this step.")
    # the person's to know: the model reads the step as before (a recording still replays)
    model_read = kernel.eval("model.requests[1].messages[-1].results[0].text")
    assert "Undo will leave" not in model_read and "+big = numpy.ndarray" in model_read
    undo = kernel.submit("%agent undo")
    kernel.finish(undo)
    said = kernel.cell_text(undo)
    assert (
        "Left as it is: big: nbagent cannot tell whether it changed after the agent's step: "
        "larger than the budget undo reads for its checks (976.6 KB, KernelLimits.copy_budget)."
        in said
    ), said
    assert (
        "Left as it is: handle: nbagent cannot tell whether it changed after the agent's step: "
        "it holds an object of type _thread.lock, which nbagent cannot read without running "
        "its code." in said
    ), said
    assert "Restored: label." in said
    assert "Removed (the agent added them): threading, small." in said
    assert kernel.eval("'big' in dir() and 'handle' in dir() and 'small' not in dir()") is True
    assert kernel.eval("label") == "old"
    kernel.execute("nbagent.notebook.current_session().kernel = None")


def test_cells_with_no_run_named_gives_every_run_as_the_toolkit_does(kernel: Kernel) -> None:
    kernel.execute("nbagent.notebook.current_session().kernel = None")
    _start(kernel, _turns("first_run_value = 1"))
    first = wait_ended(kernel, kernel.submit("%agent --new --kernel --approve auto one"))
    kernel.execute(f"model.add(*{_turns('second_run_value = 2')})")
    second = wait_ended(kernel, kernel.submit("%agent --new --kernel --approve auto two"))
    cells = kernel.submit("%agent cells")
    kernel.finish(cells)
    (payload,) = kernel.replies[cells]["content"]["payload"]
    text = payload["text"]
    assert text.index("first_run_value = 1") < text.index("second_run_value = 2")
    assert f"# nbagent {first['run_id']} · step 1" in text
    assert f"# nbagent {second['run_id']} · step 1" in text
    said = kernel.cell_text(cells)
    assert f"2 steps of {first['run_id']}, {second['run_id']}" in said
    kit = "nbagent.notebook.current_session().kernel"
    same = kernel.eval(f"'\\n'.join({kit}.cells()).rstrip() + '\\n' == {text!r}")
    assert same is True  # the code form says the same
