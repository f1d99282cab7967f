"""The course's runs kept: a notebook saved, its kernel shut down and reopened in JupyterLab
still reads as runs (text, cards, images, no "model not found"), and ``jupyter nbconvert --to
html`` shows the same; and the lessons' runs stay readable in the dark theme.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
from typing import Any

import pytest

from .course import (  # noqa: F401 (fixtures)
    SHOTS,
    browser,
    forget_kernel,
    lab,
    output_text,
    page_problems,
    run_all,
    save_and_close,
)
from .lab import Lab, faint_text, menu, open_notebook


def test_saved_runs_reopen_as_runs_and_export_to_html(lab: Lab, browser: Any) -> None:  # noqa: F811
    name = "04_rich_results.ipynb"
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    try:
        open_notebook(page, lab, name)
        run_all(page)
        save_and_close(page, lab, name)
        for kernel in lab.api("/api/kernels"):
            try:
                lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")
            except urllib.error.HTTPError as error:
                # the shut-down kernel may be listed and gone by the time we ask
                if error.code != 404:
                    raise

        page = browser.new_page(viewport={"width": 1100, "height": 1000})
        page.goto(lab.page_url(name))
        page.locator(".jp-OutputArea-output").first.wait_for(timeout=60_000)
        time.sleep(2.0)  # widget outputs would fail to render by now
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "course-reopened.png"), full_page=True)
        assert page_problems(page) == []
        shown = output_text(page)
        for text in ("⚙ sketch", "⚙ temperatures", "You: Show me the temperatures.", "finished"):
            assert text in shown, text
        assert page.locator(".jp-OutputArea-output img").count() >= 2
    finally:
        page.close()

    saved_path = lab.root / name
    raw = saved_path.read_text()
    assert "application/vnd.jupyter.widget-view+json" not in raw
    # the class report over the file JupyterLab saved: each run shows what it showed
    from nbagent.course import read_class

    (row,) = read_class([saved_path])
    assert row.runs >= 2 and row.flags == "", row
    assert '"shown"' in raw  # the runs' records keep what their outputs show
    html_path = lab.home / "export.html"
    subprocess.run(
        [
            *(sys.executable, "-m", "jupyter", "nbconvert", "--to", "html"),
            *(str(saved_path), "--output", str(html_path)),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    exported = html_path.read_text()
    for text in ("⚙ sketch", "temperatures", "Pune", "data:image/png;base64"):
        assert text in exported, text
    assert "widget-view+json" not in exported


DARK = "JupyterLab Dark"


@pytest.mark.timeout(400)  # four lessons under Run All
def test_text_stays_readable_in_the_dark_theme(lab: Lab, browser: Any) -> None:  # noqa: F811
    """Settings > Theme > JupyterLab Dark, as a person does, then Run All on the lessons with
    failed, cancelled and denied calls: no text of a run may be dark on dark (a saved error
    result was red on grey at 1.8:1)."""
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    themes = "/lab/api/settings/@jupyterlab/apputils-extension:themes"
    try:
        forget_kernel(lab, "05_streaming_and_control.ipynb")
        open_notebook(page, lab, "05_streaming_and_control.ipynb")
        menu(page, "Settings", "Theme", DARK)
        page.wait_for_function(
            "() => document.body.dataset.jpThemeName === 'JupyterLab Dark'", timeout=30_000
        )
        for name in (
            "05_streaming_and_control.ipynb",
            "03_approvals.ipynb",
            "11_the_agent_in_your_kernel.ipynb",
            "12_step_and_fork.ipynb",
        ):
            if name != "05_streaming_and_control.ipynb":
                page.close()
                page = browser.new_page(viewport={"width": 1100, "height": 1000})
                forget_kernel(lab, name)
                open_notebook(page, lab, name)
            run_all(page)
            assert page.evaluate("() => document.body.dataset.jpThemeLight") == "false"
            assert page_problems(page) == []
            assert faint_text(page) == [], name
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / f"course-dark-{name[:2]}.png"))
    except Exception:
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "course-dark-failure.png"), full_page=True)
        raise
    finally:
        page.close()
        # the other tests of this server expect the light theme
        lab.api(themes, method="PUT", body={"raw": json.dumps({"theme": "JupyterLab Light"})})


def test_the_report_reads_after_saving_and_reopening(lab: Lab, browser: Any) -> None:  # noqa: F811
    """Lesson 13 under Run All, saved, its kernel shut down, reopened: ``%agent report`` is
    still there as a table (static HTML, no widget), and the exam's refusal reads as one line."""
    name = "13_running_a_course.ipynb"
    forget_kernel(lab, name)
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    try:
        open_notebook(page, lab, name)
        run_all(page)
        assert page_problems(page) == []
        save_and_close(page, lab, name)
        page = browser.new_page(viewport={"width": 1100, "height": 1000})
        page.goto(lab.page_url(name))
        page.locator(".jp-OutputArea-output").first.wait_for(timeout=60_000)
        time.sleep(2.0)  # widget outputs would fail to render by now
        assert page_problems(page) == []
        report = page.locator(".jp-OutputArea-output", has_text="AI use in this notebook").filter(
            has_text="What is the weather in"  # this notebook's runs, not a submission's
        )
        assert report.count() == 1
        table = report.locator("table").first
        assert "What is the weather in" in table.inner_text()
        assert "offline stand-in" in table.inner_text()
        refusal = page.locator(".jp-OutputArea-output", has_text="This is an exam: AI is off")
        assert refusal.count() >= 1
        SHOTS.mkdir(exist_ok=True)
        report.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / "course-report-reopened.png"))
    except Exception:
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / "course-report-failure.png"), full_page=True)
        raise
    finally:
        page.close()
    saved = (lab.root / name).read_text()
    assert "application/vnd.jupyter.widget-view+json" not in saved


DARK = "JupyterLab Dark"
