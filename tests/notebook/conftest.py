"""Fixtures: real kernels (the current ipykernel, and ipykernel 6.29 in a venv of its own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .kernel import Kernel, make_kernel_manager

ROOT = Path(__file__).resolve().parents[2]
IPYKERNEL6 = "6.29.5"
#: A key that must never appear in any output or saved notebook.
SECRET = "sk-test-SECRET-4f9c2e7d1a"


def kernel_env(**extra: str) -> dict[str, str]:
    """The environment of a test kernel: no nbagent settings of the developer's, a fake key."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NBAGENT_", "OPENAI_", "ANTHROPIC_", "JPY_"))
    }
    env["OPENAI_API_KEY"] = SECRET
    env.update(extra)
    return env


def _build_ipykernel6_venv(where: Path) -> Path:
    python = where / "bin" / "python"
    marker = where / "nbagent-ready.json"
    want = {"ipykernel": IPYKERNEL6, "root": str(ROOT), "extra": ["pandas"]}
    if marker.exists() and json.loads(marker.read_text()) == want and python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(where)], check=True)
    subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "-q"),
            *(f"ipykernel=={IPYKERNEL6}", "pandas", "-e", str(ROOT)),
        ],
        check=True,
    )
    marker.write_text(json.dumps(want))
    return python


@pytest.fixture(scope="session", params=["ipykernel-current", "ipykernel-6.29"])
def kernel_python(request: pytest.FixtureRequest) -> str:
    """The Python a test kernel runs on: this venv's, or one with ipykernel 6.29."""
    if request.param == "ipykernel-current":
        return sys.executable
    if os.environ.get("NBAGENT_TEST_IPYKERNEL6") != "1":
        pytest.skip(
            f"ipykernel {IPYKERNEL6} run skipped: set NBAGENT_TEST_IPYKERNEL6=1 to build a venv "
            "with it (scripts/test does)"
        )
    cache = request.config.cache
    assert cache is not None
    where = cache.mkdir("ipykernel6-venv")
    try:
        python = _build_ipykernel6_venv(Path(where))
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"could not build the ipykernel {IPYKERNEL6} venv: {exc}")
    return str(python)


def start_kernel(python: str, spec_dir: Path, env: dict[str, str]) -> Kernel:
    km = make_kernel_manager(python, spec_dir)
    km.start_kernel(env=env)
    return Kernel(km)


@pytest.fixture(scope="module")
def kernel(kernel_python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    """A kernel with nbagent loaded, shared by the tests of one module."""
    k = start_kernel(kernel_python, tmp_path_factory.mktemp("spec"), kernel_env())
    try:
        k.execute(
            "%load_ext nbagent\nimport nbagent\nimport nbagent.notebook\nfrom nbagent import tool"
        )
        yield k
    finally:
        k.shutdown()


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        if "kernel" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(180))
