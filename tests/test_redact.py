"""redact_secrets: every credential shape is hidden, ordinary text is left alone."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbagent.redact import redact_secrets

OPENAI = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
LEGACY = "sk-" + "a1B2c3" * 3 + "T3BlbkFJ" + "x9Y8z7" * 3
ANTHROPIC = "sk-ant-api03-Zq81xVbN3mK7pLs0aQw9eRt2yUi5oPl4kJh6gFd8sA1zXc3vBn7mQ-AbCdEfAA"
GITHUB = "ghp_" + "A1b2C3d4E5" * 3 + "f6G7h8"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Incorrect API key provided: {OPENAI}.", "Incorrect API key provided: ***."),
        (f"key {LEGACY} rejected", "key *** rejected"),
        (f"x-api-key: {ANTHROPIC}", "x-api-key: ***"),
        (f"invalid x-api-key {ANTHROPIC}", "invalid x-api-key ***"),
        ("sk-test-SECRET-0123456789abcdef", "***"),
        (f"Authorization: Bearer {OPENAI}\nHost: x", "Authorization: ***\nHost: x"),
        ('{"authorization": "Basic dXNlcjpwYXNz"}', '{"authorization": "***"}'),
        ("proxy-authorization=Token abc123xyz", "proxy-authorization=***"),
        ("OpenAIChat(api_key='abc123def456')", "OpenAIChat(api_key='***')"),
        ('{"api-key": "0123456789abcdef"}', '{"api-key": "***"}'),
        ("header Bearer abc.def-123456 was refused", "header Bearer *** was refused"),
        ("bearer eyJ0eXAiOiJKV1Qi.x1", "bearer ***"),
        ("https://bob:hunter2@proxy.corp:8080/v1", "https://***@proxy.corp:8080/v1"),
        ("redis://default:s3cr3t@cache:6379/0 down", "redis://***@cache:6379/0 down"),
        (f"push to {GITHUB} failed", "push to *** failed"),
        ("github_pat_11ABCDEFG0" + "x" * 30, "***"),
        ("slack xoxb-123456789012-abcdefABCDEF ok", "slack *** ok"),
        ("aws AKIAIOSFODNN7EXAMPLE and ASIAY34FZKBOKMUTVV7A", "aws *** and ***"),
        ("AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "***"),
        ("hf_" + "a1B2c3D4e5" * 3 + "XYZ", "***"),
        ("gsk_" + "Q" * 20 + "1" * 20, "***"),
        ("npm_" + "z9" * 18, "***"),
        ("stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe ***"),
        ("glpat-" + "xYz12" * 4, "***"),
        (f"token {JWT}", "token ***"),
    ],
)
def test_each_credential_shape_is_replaced(text: str, expected: str) -> None:
    assert redact_secrets(text) == expected
    assert redact_secrets(expected) == expected  # idempotent


ORDINARY = [
    "The quick brown fox jumps over the lazy dog.",
    "Use scikit-learn (import sklearn; pip install sk-learn) for the task-12 model.",
    "def f(api_key: str | None = None) -> None:\n    return None",
    "Bearer of bad news; bearer authentication is described in RFC 6750.",
    "authorization: see the docs",  # too short to be a credential
    "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904 touched 3 files",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "request id 3fa85f64-5717-4562-b3fc-2c963f66afa6 failed after 3 retries",
    "connect to http://localhost:11434/v1 and https://api.openai.com/v1/chat/completions",
    "mailto:someone@example.com and user@host.example:22",
    "Tokens: input 1200, output 300; key_env=OPENAI_API_KEY",
    "desk-lamp-0123456789abcdefgh is a product code",  # 'sk-' inside a word
    "The sketch-book has 32 pages",
    "weight_12345678901234567890123456789012 is a variable name",
    "x = {'token': 5, 'key': 'value'}",
    "Das Straßenfest 🎉 beginnt um 18 Uhr.",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text


def test_long_text_keeps_everything_but_the_secrets() -> None:
    prose = "Line of ordinary log output number 12345, status ok.\n"
    text = prose * 5000 + f"Authorization: Bearer {OPENAI}\n" + prose * 5000 + ANTHROPIC
    out = redact_secrets(text)
    assert OPENAI not in out and ANTHROPIC not in out
    assert out == prose * 5000 + "Authorization: ***\n" + prose * 5000 + "***"


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
    st.sampled_from([OPENAI, ANTHROPIC, LEGACY, GITHUB, JWT, "AKIAIOSFODNN7EXAMPLE"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
)
def test_a_secret_anywhere_in_any_text_is_gone(before: str, secret: str, after: str) -> None:
    out = redact_secrets(f"{before} {secret} {after}")
    assert secret not in out


def test_importing_it_is_cheap() -> None:
    code = (
        "import sys\nimport nbagent.redact\n"
        "heavy = {'httpx2', 'IPython', 'ipywidgets', 'jsonschema', 'asyncio'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_environments_credentials_are_hidden_whatever_their_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A local server's key may be any token: the configured value itself is hidden."""
    monkeypatch.setenv("NBAGENT_API_KEY", "letmein-local-2024")
    monkeypatch.setenv("HF_TOKEN", "plainhuggingfacetoken")
    monkeypatch.setenv("SHORT_TOKEN", "tiny")  # too short to hide wherever it appears
    monkeypatch.setenv("EDITOR", "vim-with-a-long-name")  # not a credential
    out = redact_secrets(
        "key letmein-local-2024, hf plainhuggingfacetoken, tiny, vim-with-a-long-name"
    )
    assert out == "key ***, hf ***, tiny, vim-with-a-long-name"


# --- every path a tool's error takes --------------------------------------------------------

ERROR_KEY = "sk-proj-Zq81mN4vT0xR7pL2wK9sAbCd"


def _leaky_agent(**kwargs: object) -> tuple[object, object]:
    from nbagent import Agent, AutoApprove, error_result, tool
    from nbagent.models import Call, ScriptedModel, Turn

    @tool
    def fetch() -> str:
        """Fetch something; fails with the request it sent in the message."""
        headers = {"Authorization": f"Bearer {ERROR_KEY}"}
        raise RuntimeError(f"request failed: {headers}")

    @tool
    async def login() -> object:
        """Log in; answers with an error that quotes the key."""
        return error_result(f"could not log in with api_key={ERROR_KEY}")

    def shown(value: object) -> str:
        raise ValueError(f"cannot show {value}: x-api-key: {ERROR_KEY}")

    @tool(to_model_output=shown)
    def convert() -> str:
        """Returns a value whose conversion for the model fails, quoting the key."""
        return "data"

    model = ScriptedModel([Turn(Call("fetch", {}), Call("login", {}), Call("convert", {})), "ok"])
    tools = [fetch, login, convert]
    agent = Agent(model, tools, approver=AutoApprove(), **kwargs)  # type: ignore[arg-type]
    return agent, model


def test_a_tools_error_reaches_no_one_with_the_key_in_it(tmp_path: Path) -> None:
    """An exception's message, its traceback, an error result the tool returned and a failed
    conversion: the model, the events front ends draw, the history and the recording get the
    error with the key hidden (and still the rest of the message)."""
    from nbagent.events import ToolFinished
    from nbagent.recording import record

    agent, model = _leaky_agent()
    recorder = record(model)  # type: ignore[arg-type]
    agent.generator = recorder  # type: ignore[attr-defined]
    finished: list[ToolFinished] = []
    agent.observe(  # type: ignore[attr-defined]
        lambda _run, event: finished.append(event) if isinstance(event, ToolFinished) else None
    )
    agent.run_sync("go")  # type: ignore[attr-defined]
    assert {e.call.name: e.status for e in finished} == {
        "fetch": "error",
        "login": "error",
        "convert": "error",
    }
    for event in finished:
        assert ERROR_KEY not in event.result.text, event.result.text
        assert "***" in event.result.text, event.result.text
        assert ERROR_KEY not in (event.traceback or "")
    fetch = next(e for e in finished if e.call.name == "fetch")
    assert "Authorization" in fetch.result.text and "request failed" in fetch.result.text
    assert fetch.traceback and "RuntimeError" in fetch.traceback  # the traceback is still there
    sent = repr(model.requests[-1].messages)  # type: ignore[attr-defined]
    assert ERROR_KEY not in sent and "could not log in" in sent
    assert ERROR_KEY not in repr(agent.messages)  # type: ignore[attr-defined]
    saved = recorder.recording.save(tmp_path / "run.json").read_text()
    assert ERROR_KEY not in saved and len(recorder.recording.steps) == 2


def test_a_run_stopped_by_a_tool_or_failed_by_a_callback_names_no_key() -> None:
    from nbagent import Agent, RunFailedError, Tool
    from nbagent.models import Call, ScriptedModel, Turn

    class Broken:
        model = "broken"

        async def stream(self, request: object) -> object:
            raise RuntimeError(f"proxy said: authorization={ERROR_KEY}")
            yield  # an async generator

    with pytest.raises(RunFailedError) as failed:
        Agent(Broken()).run_sync("go")  # type: ignore[arg-type]
    assert ERROR_KEY not in str(failed.value) and "authorization=***" in str(failed.value)

    def halt(ctx: object) -> str:
        raise SystemExit(f"giving up, token Bearer {ERROR_KEY}")

    agent = Agent(ScriptedModel([Turn(Call("halt", {}))]), [Tool(name="halt", execute=halt)])
    result = asyncio.run(_started(agent))
    assert ERROR_KEY not in str(result.error) and "Bearer ***" in str(result.error)


async def _started(agent: object) -> object:
    run = agent.start("go")  # type: ignore[attr-defined]
    run.discard_events()
    return await run.result()


def test_nbagents_log_records_hide_keys_in_messages_and_tracebacks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failing observer is logged with its traceback, which quotes the key: whatever handler
    the person set up (here pytest's) formats the record with the key hidden."""
    agent, _ = _leaky_agent()

    def observer(_run: object, event: object) -> None:
        raise ValueError(f"observer saw x-api-key={ERROR_KEY}")

    agent.observe(observer)  # type: ignore[attr-defined]
    with caplog.at_level("ERROR", logger="nbagent"):
        agent.run_sync("go")  # type: ignore[attr-defined]
    assert "an observer of" in caplog.text and "ValueError" in caplog.text
    assert ERROR_KEY not in caplog.text and "x-api-key=***" in caplog.text


def test_every_logger_the_package_writes_to_hides_keys() -> None:
    import logging
    import re

    from nbagent.redact import LOGGERS

    root = Path(__file__).resolve().parents[1] / "nbagent"
    used = set()
    for path in root.rglob("*.py"):
        used |= set(re.findall(r"getLogger\(\"(nbagent[\w.]*)\"\)", path.read_text()))
    assert used and used <= set(LOGGERS), used
    for name in LOGGERS:
        assert logging.getLogger(name).filters, name


def test_secrets_held_in_memory_are_hidden_exactly_until_forgotten() -> None:
    """An OAuth token has no recognisable shape: it is hidden because nbagent holds it."""
    from nbagent.redact import MAX_HELD, forget_exactly, hide_exactly

    token, refresh = "opaque.Token-value~42", "refresh_opaque_value"
    assert redact_secrets(f"got {token}") == f"got {token}"  # no shape gives it away
    hide_exactly(token, refresh, "short")  # under 8 characters: an ordinary word, left
    assert redact_secrets(f"got {token} and {refresh}; short") == "got *** and ***; short"
    forget_exactly(token)
    assert redact_secrets(f"{token} {refresh}") == f"{token} ***"
    forget_exactly(refresh)
    many = [f"held-value-{i:05d}" for i in range(MAX_HELD + 10)]
    hide_exactly(*many)
    try:
        assert redact_secrets(many[-1]) == "***"
        assert redact_secrets(many[0]) == many[0]  # the oldest went first, past the bound
    finally:
        forget_exactly(*many)


def test_records_of_other_loggers_can_be_hidden_too(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK's auth loggers quote what the authorization server answered."""
    import logging

    from nbagent.redact import forget_exactly, hide_exactly, hide_in_logs

    hide_exactly("code-0f1e2d3c4b")
    hide_in_logs("nbagent-test.elsewhere")
    try:
        with caplog.at_level("DEBUG", logger="nbagent-test.elsewhere"):
            try:
                raise ValueError("the server said code-0f1e2d3c4b")
            except ValueError:
                logging.getLogger("nbagent-test.elsewhere").exception("flow %s", "code-0f1e2d3c4b")
        assert "code-0f1e2d3c4b" not in caplog.text and "flow ***" in caplog.text
        assert "ValueError: the server said ***" in caplog.text
    finally:
        forget_exactly("code-0f1e2d3c4b")
