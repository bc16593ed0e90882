"""Opening pages in a real headless Chromium (Debian's, installed by `make test`)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

BROWSER_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=15000",
    "--use-angle=swiftshader",
    "--enable-unsafe-swiftshader",  # WebGL for the points view
]


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is not installed: `make test` installs Debian's chromium")
    return path


def render(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    result = subprocess.run(
        [
            chromium(),
            *BROWSER_FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    return result.stdout, console


def drawn(dom: str, div_id: str) -> bool:
    """Plotly marks a div it has drawn with js-plotly-plot and fills it with main-svg layers."""
    tag = re.search(rf'<div[^>]*id="{re.escape(div_id)}"[^>]*>', dom)
    return tag is not None and "js-plotly-plot" in tag.group(0)


def console_errors(console: list[str]) -> list[str]:
    return [line for line in console if re.search(r"error|uncaught", line, re.I)]
