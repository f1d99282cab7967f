"""The client configurations of docs/howto/serve.md, read by the clients themselves where they
can run here (no internet: nothing that needs a sign-in or a model):

* Claude Code's CLI runs the exact line the serving cell shows (``claude mcp add …``) and the
  cell's JSON line (``claude mcp add-json``), then connects to the served notebook in a real
  kernel (``claude mcp get`` opens a session) — and the card's header names it;
* the Codex CLI reads the how-to's ``config.toml`` (``codex mcp get --json``), and refuses a
  token written in the file, as its docs say;
* Jupyter AI's own settings model (``jupyter_ai_persona_manager.mcp_server_models``) reads the
  how-to's ``.jupyter/mcp_settings.json``.

Cursor and VS Code cannot run here: their snippets are not checked by this module.

The clients come from npm (``@anthropic-ai/claude-code``, ``@openai/codex``) and PyPI
(``jupyter-ai-persona-manager``); each test skips, saying where it looked, when its client is
not installed: ``NBAGENT_CLAUDE_CODE`` (the ``claude`` binary), ``NBAGENT_CODEX`` (``codex.js``),
and the persona manager importable or in ``.venv/clients/python`` (``--no-deps`` is enough: only
its pydantic models are read). scripts/test installs all three there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from .kernel import Kernel
from .test_kernel_serve import NODE, ROOT, stop_serving

HOWTO = ROOT / "docs" / "howto" / "serve.md"
CLIENTS = ROOT / ".venv" / "clients" / "node_modules"
CLAUDE = Path(
    os.environ.get(
        "NBAGENT_CLAUDE_CODE", CLIENTS / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    )
)
CODEX = Path(os.environ.get("NBAGENT_CODEX", CLIENTS / "@openai" / "codex" / "bin" / "codex.js"))


def _blocks(language: str) -> list[str]:
    """The fenced ``language`` blocks of the how-to, in order."""
    text = HOWTO.read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def _client_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env.update(
        HOME=str(home),
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        PATH=f"{NODE.parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return env


def _claude(home: Path, *args: str) -> str:
    done = subprocess.run(
        [str(CLAUDE), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=home,
        env=_client_env(home),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_claude_code_runs_the_cells_lines_and_connects(kernel: Kernel, tmp_path: Path) -> None:
    if not CLAUDE.exists():
        pytest.skip(f"Claude Code is not installed at {CLAUDE} (npm @anthropic-ai/claude-code)")
    since = kernel.mark()
    kernel.execute("@tool\ndef ping_back(x: int) -> int:\n    '''Echo.'''\n    return x\n")
    serving = kernel.submit("%agent serve")
    kernel.finish(serving)
    line = kernel.eval("nbagent.serve().connection_line('claude')")
    json_line = json.loads(kernel.eval("nbagent.serve().connection_line('json')"))
    url = kernel.eval("nbagent.serve().url")
    try:
        words = shlex.split(line)
        assert words[:3] == ["claude", "mcp", "add"]
        _claude(tmp_path, *words[1:])  # exactly the line the cell shows
        got = _claude(tmp_path, "mcp", "get", "nbagent")
        assert "Connected" in got and "Failed" not in got, got
        assert url in got
        server = json_line["mcpServers"]["nbagent"]
        _claude(tmp_path, "mcp", "add-json", "nbagent-json", json.dumps(server))
        got = _claude(tmp_path, "mcp", "get", "nbagent-json")
        assert "Connected" in got and "Failed" not in got, got
        # the card's header names the client (from its initialize)
        header = kernel.wait_for(
            lambda: [t for t in kernel.html_texts(since) if "used by" in t and "claude" in t],
            what="the header naming Claude Code",
        )
        assert "Serving over MCP at" in header[-1]
        # a wrong token: Claude Code cannot connect
        _claude(tmp_path, "mcp", "remove", "nbagent", "-s", "local")
        wrong = line.replace(line.split("Bearer ")[1].rstrip('"'), "not-the-token")
        _claude(tmp_path, *shlex.split(wrong)[1:])
        got = _claude(tmp_path, "mcp", "get", "nbagent")
        assert "Connected" not in got or "Failed" in got, got
    finally:
        stop_serving(kernel)


def test_codex_reads_the_howtos_config(tmp_path: Path) -> None:
    if not CODEX.exists() or not NODE.exists():
        pytest.skip(f"the Codex CLI is not installed at {CODEX} (npm @openai/codex) with {NODE}")
    (toml,) = [b for b in _blocks("toml") if "[mcp_servers.nbagent]" in b]
    home = tmp_path / "codex"
    home.mkdir()

    def get(config: str) -> subprocess.CompletedProcess[str]:
        (home / "config.toml").write_text(config)
        env = _client_env(tmp_path) | {"CODEX_HOME": str(home)}
        return subprocess.run(
            [str(NODE), str(CODEX), "mcp", "get", "nbagent", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    done = get(toml.replace("PORT", "8765"))
    assert done.returncode == 0, done.stdout + done.stderr
    found = json.loads(done.stdout)
    assert found["transport"] == {
        **found["transport"],
        "type": "streamable_http",
        "url": "http://127.0.0.1:8765/mcp",
        "bearer_token_env_var": "NBAGENT_SERVE_TOKEN",
    }
    # a token written into the file is refused, as the how-to says
    inline = get('[mcp_servers.nbagent]\nurl = "http://127.0.0.1:1/mcp"\nbearer_token = "x"\n')
    assert inline.returncode != 0 or "not supported" in inline.stderr, inline.stdout


def _persona_manager() -> Path | None:
    """The folder of jupyter_ai_persona_manager: importable, or where scripts/test puts it."""
    spec = importlib.util.find_spec("jupyter_ai_persona_manager")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    there = CLIENTS.parent / "python" / "jupyter_ai_persona_manager"
    return there if there.is_dir() else None


def test_jupyter_ai_reads_the_howtos_settings() -> None:
    found = _persona_manager()
    if found is None:
        pytest.skip(
            "jupyter-ai-persona-manager is neither importable nor in "
            f"{CLIENTS.parent / 'python'} (pip install --no-deps is enough)"
        )
    models = found / "mcp_server_models.py"
    loaded = importlib.util.spec_from_file_location("_jai_mcp_server_models", models)
    assert loaded is not None and loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)  # its models only (the package needs a Jupyter server)
    (settings,) = [b for b in _blocks("json") if '"mcp_servers"' in b]
    parsed = module.McpSettings.model_validate_json(settings.replace("PORT", "8765"))
    (server,) = parsed.mcp_servers
    assert isinstance(server, module.McpServerHttp)
    assert server.url == "http://127.0.0.1:8765/mcp" and server.name == "nbagent"
    assert [(h.name, h.value) for h in server.headers] == [("Authorization", "Bearer TOKEN")]
    # Cursor's shape (headers as an object) is not Jupyter AI's
    with pytest.raises(ValueError):
        module.McpSettings.model_validate(
            {"mcp_servers": [{"type": "http", "name": "n", "url": "u", "headers": {"a": "b"}}]}
        )
