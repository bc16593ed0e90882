"""Opening pages in a real headless Chromium (Debian's, installed by `make test`)."""

import html
import json
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


def render(
    page: Path, tmp_path: Path, window: tuple[int, int] | None = None
) -> tuple[str, list[str]]:
    """The page's DOM once loaded (Chromium's own window is 800 x 600 unless `window` says
    otherwise), and the console lines it logged."""
    size = [f"--window-size={window[0]},{window[1]}"] if window else []
    result = subprocess.run(
        [
            chromium(),
            *BROWSER_FLAGS,
            *size,
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


EVALUATED_ID = "evbench-evaluated"


def evaluate(
    page: Path, tmp_path: Path, expression: str, window: tuple[int, int], settle_ms: int = 3000
) -> tuple[object, list[str]]:
    """The JSON value of the JavaScript `expression` in `page` laid out in a `window`-sized
    browser, `settle_ms` (virtual) after it loaded, and the console lines it logged.

    Evaluated by a copy of the page beside it (so its relative URLs resolve) with a script
    that writes the value into the DOM, which Chromium's DOM dump brings back."""
    probe = page.with_name(f"evaluated-{page.name}")
    script = (
        "<script>window.addEventListener('load', function () { setTimeout(function () {"
        f"var out = document.createElement('pre'); out.id = '{EVALUATED_ID}';"
        f"out.textContent = JSON.stringify(({expression})); document.body.appendChild(out);"
        f"}}, {settle_ms}); }});</script>"
    )
    text = page.read_text()
    assert text.count("</body>") == 1, page
    probe.write_text(text.replace("</body>", script + "</body>"))
    dom, console = render(probe, tmp_path, window)
    found = re.search(rf'<pre id="{EVALUATED_ID}">(.*?)</pre>', dom, re.S)
    assert found is not None, f"the expression wrote nothing: {console}"
    return json.loads(html.unescape(found.group(1))), console
