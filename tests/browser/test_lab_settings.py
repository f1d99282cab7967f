"""The JupyterLab settings that ``scripts/run`` and Binder install (``binder/overrides.json``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .lab import running_lab

ROOT = Path(__file__).resolve().parents[2]


def test_the_news_pop_up_is_off(tmp_path: Path) -> None:
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        print("settings test skipped: jupyterlab is not installed")
        pytest.skip("jupyterlab is not installed")
    app_settings = tmp_path / "app-settings"
    app_settings.mkdir()
    shutil.copy(ROOT / "binder" / "overrides.json", app_settings / "overrides.json")
    args = (f"--LabApp.app_settings_dir={app_settings}",)
    with running_lab(tmp_path, tmp_path / "home", args=args, quiet_news=False) as lab:
        found = lab.api("/lab/api/settings/@jupyterlab/apputils-extension:notification")
    # the server folds overrides.json into the schema's defaults
    defaults = {k: v.get("default") for k, v in found["schema"]["properties"].items()}
    assert defaults["fetchNews"] == "false"
    assert defaults["checkForUpdates"] is False
