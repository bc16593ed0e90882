"""The HTML around every report (analysis.report): one page shell and the escaping helpers.

Names of runs and SUTs come from users (and from directories made by hand or by older versions,
so they are never trusted): every string is escaped for where it lands (HTML text, attributes,
URLs, Plotly's text), and element ids are derived from positions, never from names.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import plotly
import plotly.offline

from runtime.files import write_text_atomically

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; min-width: 28rem; }
.holds { background: #e6f4ea; } .breaks { background: #fde7e7; }
.sender-limited, .insufficient-data { background: #eee; }
.instrument-failed { background: #fff3cd; }
.banner { padding: 0.6rem 1rem; margin: 0.5rem 0 1rem; border-left: 0.4rem solid; }
.banner.failed { background: #fde7e7; border-color: #d62728; }
.banner.interrupted { background: #fff3cd; border-color: #e0a800; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 1rem; }
.grid > * { min-width: 0; }
.plotly-graph-div { width: 100%; max-width: 100%; }
.note { color: #555; font-size: 0.85rem; max-width: 60rem; }
td.left { text-align: left; overflow-wrap: anywhere; }
.scrape-failed { background: #fde7e7; } .profile-failed { color: #b00020; }
.profile { margin: 0.5rem 0 1.5rem; } img.flame { max-width: 100%; border: 1px solid #ccc; }
"""

# Plotly's `responsive` follows the window's size only. A plot drawn while the page is still
# being laid out takes the width its container had then: on the index, the first system's plot
# is drawn before the second column exists, as wide as the whole grid, and was cut off at its
# column's edge. Every plot is fitted to its box once the page is laid out, and again whenever
# that box changes.
FIT_PLOTS = """
(function () {
  if (!window.Plotly) return;
  var plots = document.querySelectorAll('.plotly-graph-div');
  function fit(div) {
    var drawn = div._fullLayout;
    if (drawn && div.offsetParent !== null && Math.abs(div.clientWidth - drawn.width) >= 1) {
      Plotly.Plots.resize(div).catch(function () {});
    }
  }
  window.addEventListener('load', function () { plots.forEach(fit); });
  if (window.ResizeObserver) {
    var observer = new ResizeObserver(function (entries) {
      entries.forEach(function (entry) { fit(entry.target); });
    });
    plots.forEach(function (div) { observer.observe(div); });
  }
})();
"""


def plotly_js(runs_root: Path) -> Path:
    """The one offline copy of plotly.js for every report under `runs_root`."""
    path = runs_root / f"plotly-{plotly.__version__}.min.js"
    if not path.exists():
        write_text_atomically(path, plotly.offline.get_plotlyjs())
    return path


def page(title: str, script: Path, at: Path, body: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style><script src='{href(script, at)}'></script></head>"
        f"<body>{body}<script>{FIT_PLOTS}</script></body></html>"
    )


def href(target: Path, base: Path) -> str:
    """A relative URL for an attribute: percent-encoded, so a directory named `javascript:x`
    or holding quotes stays a path."""
    return html.escape(quote(os.path.relpath(target, base)))


def cell(value: object) -> str:
    return html.escape(str(value))


def plotly_text(text: str) -> str:
    """Plotly renders a subset of HTML in titles and legends; escaped, a name shows as typed."""
    return html.escape(text, quote=False)


def figure_html(figure: Any, div_id: str) -> str:
    """A responsive plot: as wide as its container (no fixed width: any is removed from
    `figure`), as tall as the figure says. `div_id` is a fixed name or one derived from a
    position: Plotly pastes it unescaped into the page's HTML and script."""
    figure.update_layout(autosize=True, width=None)
    height = figure.layout.height
    return figure.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config={"responsive": True},
        default_width="100%",
        default_height=f"{height}px" if height else "100%",
    )
