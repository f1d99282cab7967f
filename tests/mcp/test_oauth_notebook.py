"""Signing in to an OAuth-protected MCP server from real kernel cells: the link in the cell,
followed by an HTTP client as a browser would follow it, back to the kernel's loopback; a call,
a refresh, ``%agent mcp logout`` and ``login``; a forged redirect; a headless kernel that
refuses at once; ``--header`` with its secret from the environment. Then every place a token
could end up is searched for the ones the server issued: the notebook as a frontend saves it
(widget state included), the recording, the kernel's log, the spans."""

from __future__ import annotations

import html
import json
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from ..notebook.conftest import kernel_env, start_kernel
from ..notebook.kernel import Kernel
from .conftest import DEMO
from .oauth import browse, leaked, mode, oauth_server, stats

_HREF = re.compile(r'href="([^"]+)"')


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with oauth_server(ttl=5) as url:
        yield url


@pytest.fixture(autouse=True)
def behaving(base: str) -> Iterator[None]:
    mode(base, "normal")
    yield
    mode(base, "normal")


def _kernel(where: Path, **env: str) -> Kernel:
    k = start_kernel(sys.executable, where, kernel_env(**env))
    k.execute("%load_ext nbagent\nimport nbagent, nbagent.notebook")
    return k


def cell(k: Kernel, code: str, **kwargs: Any) -> str:
    """Run a cell; its msg_id."""
    msg_id = k.submit(textwrap.dedent(code))
    k.finish(msg_id, **kwargs)
    return msg_id


def link_of(k: Kernel, msg_id: str) -> str:
    """The sign-in link a running cell shows (the href of its text/html, unescaped)."""

    def shown() -> str | None:
        for msg in k.iopub:
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            data = msg["content"].get("data", {})
            found = _HREF.search(str(data.get("text/html", "")))
            if msg["msg_type"] == "display_data" and found:
                return html.unescape(found.group(1))
        return None

    url: str = k.wait_for(shown, 60, "the sign-in link in the cell")
    return url


def sign_in_by_browser(k: Kernel, code: str) -> str:
    """Run a cell that signs in; follow its link as a browser; wait for the cell."""
    msg_id = k.submit(textwrap.dedent(code))
    browse(link_of(k, msg_id))
    k.finish(msg_id)
    return msg_id


def errors_of(k: Kernel, msg_id: str) -> str:
    """What a cell said went wrong: its error, or the UsageError IPython prints on stderr."""
    said = []
    for m in k.iopub:
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        if m["msg_type"] == "error":
            said.append(f"{m['content'].get('ename')}: {m['content'].get('evalue')}")
        elif m["msg_type"] == "stream" and m["content"]["name"] == "stderr":
            said.append(m["content"]["text"])
    return "\n".join(said)


def run_whoami(k: Kernel, since: str = "") -> str:
    """A run whose model calls secure__whoami; the text of the call's result."""
    cell(
        k,
        """
        from nbagent.models import ScriptedModel, Call, Turn
        model = ScriptedModel([Turn(Call("secure__whoami", {})), "done"])
        nbagent.notebook.current_session().set_model(model)
        """,
    )
    cell(k, "%agent --record --approve auto who is it")
    k.wait_for(lambda: k.eval("len(model.requests)") == 2, what="the second request")
    text = k.eval("model.requests[1].messages[-1].results[0].text")
    assert isinstance(text, str)
    return text


def test_sign_in_from_a_cell_call_refresh_logout_login_and_no_token_anywhere(
    base: str, tmp_path: Path
) -> None:
    log = tmp_path / "kernel.log"
    spans = tmp_path / "spans.json"
    recordings = tmp_path / "recordings"
    k = _kernel(tmp_path / "spec", NBAGENT_RECORDINGS=str(recordings))
    cells: list[str] = []
    try:
        cells.append(
            cell(
                k,
                f"""
                import logging
                logging.basicConfig(level=logging.DEBUG, filename={str(log)!r}, force=True)
                from opentelemetry.sdk.trace import TracerProvider
                from opentelemetry.sdk.trace.export import SimpleSpanProcessor
                from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
                    InMemorySpanExporter,
                )
                from nbagent.telemetry import instrument
                exporter = InMemorySpanExporter()
                provider = TracerProvider()
                provider.add_span_processor(SimpleSpanProcessor(exporter))
                instrument(
                    nbagent.notebook.current_session().agent,
                    tracer_provider=provider,
                    capture_content=True,
                )
                """,
            )
        )
        cells.append(cell(k, f"%agent mcp add demo -- {sys.executable} {DEMO} stdio"))
        added = sign_in_by_browser(k, f"%agent mcp add secure --url {base}/mcp")
        cells.append(added)
        text = k.cell_text(added)
        assert "Signed in to the MCP server secure." in text, text
        assert "Sign in to the MCP server" not in text  # the link was replaced when done
        markdown = k.cell_text(added, "text/markdown")
        assert "| sign-in |" in markdown and "signed in, expires at" in markdown, markdown
        assert run_whoami(k) == "the secure server, signed in"
        # tokens last 5 s: wait past that, and the next call refreshes first
        k.wait_for(
            lambda: (
                "renewed"
                in k.eval("nbagent.current_session().mcp_servers['secure'].sign_in_status")
            ),
            60,
            "the token to expire",
        )
        refreshes = stats(base)["refreshes"]
        assert run_whoami(k) == "the secure server, signed in"
        assert stats(base)["refreshes"] == refreshes + 1
        out = cell(k, "%agent mcp logout secure")
        cells.append(out)
        assert "signed out of the MCP server 'secure'" in k.cell_text(out)
        assert "sign-in needed" in k.cell_text(out, "text/markdown")
        refused = run_whoami(k)
        assert "needs you to sign in again" in refused and "%agent mcp login secure" in refused
        login = sign_in_by_browser(k, "%agent mcp login secure")
        cells.append(login)
        assert "Signed in to the MCP server secure." in k.cell_text(login)
        assert run_whoami(k) == "the secure server, signed in"
        assert k.eval("nbagent.current_session().mcp_servers['demo'].running") is True
        cells.append(
            cell(
                k,
                f"""
                import json
                with open({str(spans)!r}, "w") as f:
                    json.dump([s.to_json() for s in exporter.get_finished_spans()], f)
                logging.shutdown()
                """,
            )
        )
        notebook = {
            "cells": [{"outputs": k.cell_outputs(msg_id)} for msg_id in k.replies],
            "metadata": {"widgets": {"state": k.widgets}},
        }
        saved = json.dumps(notebook)
        recorded = "".join(p.read_text() for p in recordings.rglob("*") if p.is_file())
        logged = log.read_text()
        traced = spans.read_text()
        assert "execute_tool secure__whoami" in traced  # the spans of the calls are there
        assert "secure__whoami" in recorded  # and the recording of the runs
        assert "HTTP Request: POST" in logged  # and the requests, in the log
        assert leaked(base, saved, recorded, logged, traced) == []
    finally:
        k.shutdown()


def test_a_forged_redirect_is_a_clear_message_in_the_cell_and_the_kernel_goes_on(
    base: str, tmp_path: Path
) -> None:
    k = _kernel(tmp_path)
    try:
        msg_id = k.submit(f"%agent mcp add secure --url {base}/mcp")
        browse(link_of(k, msg_id), tamper=lambda a: a.replace("state=", "state=forged"))
        k.finish(msg_id, allow_errors=True)
        error = errors_of(k, msg_id)
        assert "MCP server 'secure' could not sign in: the browser came back with a `state`" in (
            error
        ), error
        # the link is gone, and nothing repeats the error: the cell ends with that one line
        shown = [o["data"] for o in k.cell_outputs(msg_id) if o["output_type"] == "display_data"]
        assert shown == [{}], shown
        assert leaked(base, error, json.dumps(k.cell_outputs(msg_id))) == []
        assert k.eval("sorted(nbagent.notebook.current_session().mcp_servers)") == []
        assert k.eval("1 + 1") == 2
    finally:
        k.shutdown()


def test_a_headless_kernel_refuses_at_once_and_registers_nothing(base: str, tmp_path: Path) -> None:
    k = _kernel(tmp_path, NBAGENT_MODE="headless")
    try:
        before = stats(base)
        msg_id = cell(k, f"%agent mcp add secure --url {base}/mcp", allow_errors=True)
        error = errors_of(k, msg_id)
        assert "could not sign in: this run is headless (NBAGENT_MODE=headless)" in error, error
        assert "--header 'Authorization: Bearer $TOKEN_VAR'" in error
        assert "href=" not in json.dumps(k.cell_outputs(msg_id))  # no link shown
        after = stats(base)
        assert after["registrations"] == before["registrations"]
        assert after["authorizations"] == before["authorizations"]
    finally:
        k.shutdown()


def test_a_header_takes_its_secret_from_the_environment_and_never_shows_it(
    base: str, tmp_path: Path
) -> None:
    token = "tok-never-shown-8c1f2a"
    k = _kernel(tmp_path, MY_SERVER_KEY=token)
    try:
        literal = cell(
            k,
            "%agent mcp add web --url http://127.0.0.1:9/mcp --header 'Authorization: Bearer x1'",
            allow_errors=True,
        )
        assert "write the secret as an environment variable of the kernel" in errors_of(k, literal)
        missing = cell(
            k,
            "%agent mcp add web --url http://127.0.0.1:9/mcp --header 'X-Api-Key: $NOPE_VAR'",
            allow_errors=True,
        )
        assert "the kernel has no environment variable NOPE_VAR" in errors_of(k, missing)
        # the header is sent (the server refuses it: a wrong token), and not signed in to
        before = stats(base)
        sent = cell(
            k,
            f"%agent mcp add secure --url {base}/mcp "
            "--header 'Authorization: Bearer $MY_SERVER_KEY'",
            allow_errors=True,
        )
        error = errors_of(k, sent)
        assert "HTTP 401 Unauthorized" in error, error
        assert stats(base)["registrations"] == before["registrations"]
        shown = json.dumps([k.cell_outputs(m) for m in (literal, missing, sent)]) + error
        assert token not in shown
        assert k.eval(f"nbagent.redact.redact_secrets('x {token} y')") == "x *** y"
    finally:
        k.shutdown()


def test_interrupting_a_cell_that_waits_for_a_sign_in_ends_it_and_its_listener(
    base: str, tmp_path: Path
) -> None:
    import socket
    from urllib.parse import parse_qs, urlsplit

    from .conftest import wait_until

    k = _kernel(tmp_path)
    try:
        msg_id = k.submit(f"%agent mcp add secure --url {base}/mcp")
        link = link_of(k, msg_id)
        port = urlsplit(parse_qs(urlsplit(link).query)["redirect_uri"][0]).port
        assert port is not None
        socket.create_connection(("127.0.0.1", port), 5).close()  # listening while it waits
        k.km.interrupt_kernel()
        k.finish(msg_id, allow_errors=True)
        reply = k.replies[msg_id]["content"]
        assert reply["ename"] == "KeyboardInterrupt", reply
        assert reply["evalue"] == (
            "adding the MCP server 'secure' was stopped by a kernel interrupt: it was not added"
        )
        assert k.cell_text(msg_id) == ""  # the link is gone: the error is the cell's one line

        def closed() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
            except OSError:
                return True
            return False

        wait_until(closed, 20, "the loopback listener to close")
        assert k.eval("sorted(nbagent.notebook.current_session().mcp_servers)") == []
        assert k.eval("1 + 1") == 2
    finally:
        k.shutdown()


def test_a_refresh_refused_mid_session_is_a_clear_result_and_the_rest_goes_on(
    base: str, tmp_path: Path
) -> None:
    from .oauth import expire

    k = _kernel(tmp_path)
    try:
        cell(k, f"%agent mcp add demo -- {sys.executable} {DEMO} stdio")
        sign_in_by_browser(k, f"%agent mcp add secure --url {base}/mcp")
        mode(base, "fail-refresh")
        expire(base)
        refused = run_whoami(k)
        assert refused == (
            "'whoami' on MCP server 'secure' failed: MCP server 'secure' needs you to sign in "
            "again (its token expired and the refresh was refused: HTTP 400 invalid_grant): "
            "run `%agent mcp login secure` in the notebook (or server.sign_in() from Python)"
        )
        listed = cell(k, "%agent mcp list")
        assert "sign-in needed" in k.cell_text(listed, "text/markdown")
        assert "needs you to sign in again" in k.cell_text(listed)  # and why, below the table
        cell(
            k,
            """
            from nbagent.models import ScriptedModel, Call, Turn
            model = ScriptedModel([Turn(Call("demo__add", {"a": 2, "b": 3})), "five"])
            nbagent.notebook.current_session().set_model(model)
            """,
        )
        cell(k, "%agent --approve auto add")
        k.wait_for(lambda: k.eval("len(model.requests)") == 2, what="the second request")
        assert k.eval("model.requests[1].messages[-1].results[0].text") == "5"
        mode(base, "normal")
        sign_in_by_browser(k, "%agent mcp login secure")
        assert run_whoami(k) == "the secure server, signed in"
        assert leaked(base, refused, k.cell_text(listed)) == []
    finally:
        k.shutdown()
