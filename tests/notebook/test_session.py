"""Session registry, option parsing, frontend detection and the extension's load, in-process."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from IPython.core.error import UsageError

from nbagent.approvals.approval import AutoApprove, DenyAll, InteractiveApprover
from nbagent.errors import SchemaError
from nbagent.notebook.core.frontend import approver_for, choose_policy, detect
from nbagent.notebook.core.session import Session, as_tool
from nbagent.notebook.magics import interpolate, split_options
from nbagent.tools import Definition, Tool, tool


def cell_tool(name: str, result: str = "") -> Tool:
    """A Tool as @tool makes it in a notebook cell (module __main__)."""

    def fn(city: str) -> str:
        return result or name

    fn.__name__ = name
    fn.__module__ = "__main__"
    fn.__doc__ = f"{name} tool."
    return tool(fn)


def test_scan_registers_replaces_and_drops_tools_from_the_namespace() -> None:
    session = Session()
    ns: dict[str, Any] = {"weather": cell_tool("weather", "v1"), "_": cell_tool("ghost")}
    assert session.scan(ns) == []
    assert list(session.tools) == ["weather"]  # "_" (output history) is never a tool source
    first = session.tools["weather"]
    ns["weather"] = cell_tool("weather", "v2")  # the cell ran again
    session.scan(ns)
    assert session.tools["weather"] is ns["weather"] is not first
    ns["weather"] = lambda city: city  # the name now holds a plain function
    session.scan(ns)
    assert session.tools == {}


def test_scan_ignores_imported_tools_and_reports_invalid_ones_once() -> None:
    session = Session()

    def imported_fn(city: str) -> str:
        return city

    imported = tool(imported_fn)
    bad = Tool(name="no spaces allowed", execute=lambda c: 1)
    bad_exec = bad.execute
    assert bad_exec is not None
    object.__setattr__(bad_exec, "__module__", "__main__")
    ns: dict[str, Any] = {"imported": imported, "bad": bad}
    problems = session.scan(ns)
    assert len(problems) == 1 and "'no spaces allowed' (bad) was not registered" in problems[0]
    assert session.scan(ns) == []  # said once, not after every cell
    assert session.tools == {}


def test_two_variables_with_one_tool_name_warn() -> None:
    session = Session()
    ns = {"a": cell_tool("same", "a"), "b": cell_tool("same", "b")}
    problems = session.scan(ns)
    assert problems and "several tools are named 'same' (a, b); using the one in b" in problems[0]
    assert session.tools["same"] is ns["b"]


def test_explicit_registration_survives_scans_until_a_cell_redefines_it() -> None:
    session = Session()
    ns: dict[str, Any] = {"weather": cell_tool("weather", "cell")}
    session.scan(ns)

    def other(city: str) -> str:
        return "explicit"

    explicit = tool(other, name="weather")
    (made,) = session.register(explicit)
    assert made is explicit
    session.scan(ns)  # nothing changed in the namespace: the explicit one stays
    assert session.tools["weather"] is explicit
    ns["weather"] = cell_tool("weather", "newer cell")
    session.scan(ns)
    assert session.tools["weather"] is ns["weather"]
    assert session.unregister("weather") and not session.unregister("weather")


def test_register_definition_with_function_and_rejections() -> None:
    definition = Definition(
        name="add",
        input_schema={"type": "object", "properties": {"a": {"type": "integer"}}},
    )
    made = as_tool(definition, function=lambda a: a + 1)
    assert made.name == "add" and made.function is not None
    with pytest.raises(TypeError, match="needs function="):
        as_tool(definition)
    with pytest.raises(TypeError, match="cannot register a int"):
        as_tool(3)
    session = Session()
    with pytest.raises(SchemaError, match="remote"):
        session.register(
            Definition(name="remote", input_schema={"$ref": "https://x/y.json"}),
            function=lambda: 1,
        )
    assert session.tools == {}


def test_sync_agent_gives_the_agent_exactly_the_registered_tools() -> None:
    session = Session()
    session.set_model("offline")
    session.register(cell_tool("one"), cell_tool("two"))
    agent = session.sync_agent()
    assert sorted(agent.tools) == ["one", "two"]
    session.unregister("one")
    assert sorted(session.sync_agent().tools) == ["two"]


def test_split_options_keeps_the_prompt_verbatim() -> None:
    assert split_options('-m offline --new What\'s "up"?') == (
        ["-m", "offline", "--new"],
        'What\'s "up"?',
    )
    assert split_options("--tools=a,b --approve auto -o out hi") == (
        ["--tools=a,b", "--approve", "auto", "-o", "out"],
        "hi",
    )
    assert split_options("-5°C is cold?") == ([], "-5°C is cold?")
    assert split_options("--new -- --literal dashes") == (["--new"], "--literal dashes")
    with pytest.raises(UsageError, match="unknown option --nope"):
        split_options("--nope x")
    with pytest.raises(UsageError, match="-m needs a value"):
        split_options("-m")


def test_interpolate_names_not_code() -> None:
    class Box:
        size = 3

    ns = {"city": "Paris", "box": Box()}
    assert interpolate("in {city}, {box.size} boxes", ns) == "in Paris, 3 boxes"
    assert interpolate("{missing} {box.nope} {{literal}}", ns) == "{missing} {box.nope} {literal}"
    assert interpolate("{__import__('os').getcwd()}", ns) == "{__import__('os').getcwd()}"


class FakeKernel:
    def __init__(self, allow_stdin: bool | None) -> None:
        self.allow = allow_stdin

    def get_parent(self, channel: str = "shell") -> dict[str, Any]:
        if self.allow is None:
            return {}
        return {"header": {"msg_type": "execute_request"}, "content": {"allow_stdin": self.allow}}


class FakeShell:
    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.parent_header: dict[str, Any] = {}


def test_detect_reads_allow_stdin_and_honours_the_override() -> None:
    assert detect(FakeShell(FakeKernel(True)), {}).interactive
    headless = detect(FakeShell(FakeKernel(False)), {})
    assert not headless.interactive and "nbclient" in headless.reason
    assert detect(FakeShell(FakeKernel(None)), {}).interactive  # unknown: assume a person
    assert not detect(FakeShell(None), {}).interactive  # plain IPython, no kernel
    env = {"NBAGENT_MODE": "headless"}
    assert not detect(FakeShell(FakeKernel(True)), env).interactive
    env = {"NBAGENT_MODE": "interactive"}
    assert detect(FakeShell(FakeKernel(False)), env).interactive


def test_policy_order_and_approvers() -> None:
    person = detect(FakeShell(FakeKernel(True)), {})
    nobody = detect(FakeShell(FakeKernel(False)), {})
    assert choose_policy(None, person, {}) == ("ask", "default")
    assert choose_policy(None, nobody, {}) == ("deny", "default")
    assert choose_policy(None, nobody, {"NBAGENT_APPROVAL": "AUTO"}) == ("auto", "NBAGENT_APPROVAL")
    assert choose_policy("deny", person, {"NBAGENT_APPROVAL": "auto"}) == ("deny", "--approve")
    with pytest.raises(ValueError, match="NBAGENT_APPROVAL='maybe'"):
        choose_policy(None, person, {"NBAGENT_APPROVAL": "maybe"})
    shared = InteractiveApprover()
    assert approver_for("ask", "default", person, shared) is shared
    assert isinstance(approver_for("auto", "--approve", nobody, shared), AutoApprove)
    headless = approver_for("ask", "NBAGENT_APPROVAL", nobody, shared)
    assert isinstance(headless, DenyAll) and "NBAGENT_APPROVAL=auto" in headless.reason
    explicit = approver_for("deny", "--approve", person, shared)
    assert isinstance(explicit, DenyAll) and "--approve=deny" in explicit.reason


def test_loading_the_extension_imports_no_widgets() -> None:
    code = (
        "import sys\n"
        "from IPython.testing.globalipapp import start_ipython\n"
        "ip = start_ipython()\n"
        "ip.run_line_magic('load_ext', 'nbagent')\n"
        "assert 'agent' in ip.magics_manager.magics['line']\n"
        "heavy = [m for m in ('ipywidgets', 'anywidget', 'httpx2') if m in sys.modules]\n"
        "print('HEAVY=' + repr(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    found = [line for line in out.stdout.splitlines() if line.startswith("HEAVY=")]
    assert out.returncode == 0 and found, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    assert found[-1] == "HEAVY=[]"


def test_provider_warnings_come_once_when_a_tool_or_a_new_provider_arrives(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("NBAGENT_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    session = Session()
    either = Tool(
        name="either",
        input_schema={"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        execute=lambda ctx: None,
    )
    session.register(either)  # the offline model takes anything: nothing to say
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0123456789abcdef")
    session.set_model("anthropic:claude-sonnet-4-5")
    warned = capsys.readouterr().err
    assert "Anthropic would reject tool 'either': `anyOf` is not allowed at the root" in warned
    session.set_model("anthropic:claude-opus-4-1")  # the same provider: nothing new to say
    assert capsys.readouterr().err == ""
    session.register(either)  # registered again while Anthropic is configured: said again
    assert "Anthropic would reject tool 'either'" in capsys.readouterr().err
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session.sync_agent()  # the agent does not warn a second time at the run's start


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("allow write_file", ["write_file"]),
        ("allow write_file path=data/*", ["write_file", "path=data/*"]),
        (
            'deny write_file path="my data/*" overwrite=true',
            ["write_file", "path=my data/*", "overwrite=true"],
        ),
        ("approval-timeout 30", ["30"]),
        ("approval-timeout off", ["off"]),
        ("rules remove 3", ["remove", "3"]),
        ("-- allow me to ask something", None),  # after --: a prompt
        ("allowance for this?", None),  # its first word names no subcommand
    ],
)
def test_rule_subcommands_and_prompts(line: str, words: list[str] | None) -> None:
    from nbagent.loop._ids import expand
    from nbagent.notebook.commands import find

    found = find(line)
    # a run's short id is this session's full one (run-3 is run-<prefix>-3)
    assert (found[1] if found else None) == (None if words is None else list(map(expand, words)))


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("allow me to ask something", "'to' is not ARG=PATTERN"),  # starts like a rule
        ("allow me, don't worry", "No closing quotation (check the quotes)"),
        ("deny =x", "'=x' is not a tool's name"),
        ("approval-timeout for this call?", "'for' is not a positive number of seconds"),
        ("approval-timeout -5", "'-5' is not a positive number of seconds"),
        ("approval-timeout inf", "'inf' is not a positive number of seconds"),
        ("rules remove ²", "'²' is not a whole number from 1 or a tool's name"),
        ("rules remove", "missing N or TOOL"),
    ],
)
def test_a_rule_subcommand_written_wrong_is_answered_with_its_usage(line: str, said: str) -> None:
    from nbagent.notebook.commands import find

    with pytest.raises(UsageError) as raised:
        find(line)
    message = str(raised.value)
    name = line.split()[0]
    assert said in message and "nothing was sent to the model" in message
    assert f"Usage:\n  %agent {name}" in message
    assert f"put -- first: %agent -- {line}" in message


def test_rule_subcommands_run(capsys: pytest.CaptureFixture[str]) -> None:
    from nbagent.notebook.commands import find

    session = Session()
    session.register(cell_tool("weather"))

    def run(line: str) -> str:
        found = find(line)
        assert found is not None, line
        command, words = found
        command.run(session, None, words)
        return capsys.readouterr().out

    assert "rule 1: allow weather city=Paris" in run("allow weather city=Paris")
    with pytest.raises(UsageError, match=r"no tool named 'rain'.*%agent -- allow rain"):
        run("allow rain")
    with pytest.raises(UsageError, match="has no argument 'town'"):
        run("deny weather town=x")
    assert "120 s" in run("approval-timeout 120") and session.approval_timeout == 120
    assert "off" in run("approval-timeout off") and session.approval_timeout is None
    assert "removed: allow weather city=Paris" in run("rules remove 1")
    with pytest.raises(UsageError, match="no rule '1'"):
        run("rules remove 1")


def test_every_subcommand_has_a_grammar_and_its_forms_are_the_help() -> None:
    from nbagent.notebook.command.grammar import GRAMMARS
    from nbagent.notebook.commands import COMMANDS
    from nbagent.notebook.magics import HELP

    assert set(COMMANDS) == set(GRAMMARS)
    help_lines = [line.strip() for line in HELP.splitlines()]
    for grammar in GRAMMARS.values():
        for line in grammar.usage(explained=True).splitlines():
            assert line.strip() in help_lines, line


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("fork run-3 2", ["run-3", "2", ""]),
        (
            "fork run-3 2 --step -m offline try the cache",
            ["run-3", "2", "--step -m offline try the cache"],
        ),
        ("compare run-3 run-5", ["run-3", "run-5"]),
        ("undo", []),
        ("undo run-3 run-4", ["run-3", "run-4"]),
        ("undo run-3 step 2", ["run-3", "step", "2"]),
        ("cells run-3", ["run-3"]),
        ("map --over df 'Grade {a}'", ["--over df 'Grade {a}'"]),
        ("help fork", ["fork"]),
        ("rules clear", ["clear"]),
        ("-- fork run-3", None),
        ("forks are useful", None),
    ],
)
def test_subcommand_lines_and_what_their_grammar_takes(line: str, words: list[str] | None) -> None:
    from nbagent.loop._ids import expand
    from nbagent.notebook.commands import find

    found = find(line)
    # a run's short id is this session's full one (run-3 is run-<prefix>-3)
    assert (found[1] if found else None) == (None if words is None else list(map(expand, words)))
