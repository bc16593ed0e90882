"""Reports open in a real headless Chromium without console errors, every plot drawn."""

import html
import json
import re
import shutil

import pytest

from analysis.comparison import (
    calls_text,
    comparison_rows,
    comparison_text,
    with_changes,
    write_comparison,
)
from analysis.job import AnalyzeOptions, analyze
from analysis.report import write_index, write_report
from contract.errors import EvbenchError
from tests.analysis.crafted import craft
from tests.browser import console_errors, drawn, evaluate, render

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def reports(analysed_run):
    root, sut = analysed_run
    return root, write_report(sut), write_index(sut.parent, [sut])


def test_report_renders_every_plot_without_console_errors(reports, tmp_path):
    root, report, _ = reports
    dom, console = render(report, tmp_path)
    errors = console_errors(console)
    assert errors == []
    for div_id in ("six-series", "latency-points", "sender-health", "resources", "spectrum-e2e"):
        assert drawn(dom, div_id), div_id
    assert dom.count('class="main-svg"') >= 4
    assert "consumer lag" in dom and "dispatcher" in dom
    assert "breaks at 400/s" in dom and "max sustainable 200/s" in dom
    # the run scraped and profiled nothing: no empty sections for it
    assert "System metrics" not in dom and "<h2>Profiles</h2>" not in dom
    # offline: one shared plotly.js under runs/, referenced relatively
    assert len(list(root.glob("plotly-*.min.js"))) == 1
    sources = re.findall(r"<script[^>]*\ssrc=['\"]([^'\"]+)", report.read_text())
    assert sources and all(not re.match(r"(https?:)?//", src) for src in sources), sources


def test_index_shows_every_sut(reports, tmp_path):
    _, _, index = reports
    dom, console = render(index, tmp_path)
    assert console_errors(console) == []
    assert drawn(dom, "six-0") and drawn(dom, "spectrum-systems")
    assert "analysis/report.html" in dom


# Each column of the index's grid: its box, and the boxes of its plots' SVG layers (left, top,
# right, bottom in CSS pixels); and how many plots the page drew in all.
COLUMN_BOXES = """{
  plots: document.querySelectorAll('.js-plotly-plot').length,
  columns: Array.from(document.querySelectorAll('.grid > *')).map(function (column) {
    function box(element) {
      var b = element.getBoundingClientRect();
      return [b.left, b.top, b.right, b.bottom];
    }
    return {
      box: box(column),
      plots: column.querySelectorAll('.js-plotly-plot').length,
      svgs: Array.from(column.querySelectorAll('.js-plotly-plot .main-svg')).map(box)
    };
  })
}"""


def _inside(inner, outer, slack=1.0):
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


@pytest.mark.parametrize("window", [(1280, 1600), (1900, 1600)])
def test_the_index_plots_fit_their_columns(reports, tmp_path, window):
    """The index shows systems side by side. Plots drawn while the page was still being laid
    out were as wide as the first column alone, and were cut off at the column's edge once
    the second column came (broker-kafka's x axis ended at ~22 s of 47)."""
    root, _, _ = reports
    run_dir = tmp_path / "runs" / "run-two"
    suts = []
    for name in ("broker-kafka", "source-kafka"):
        shutil.copytree(root / "run-x-p" / "direct", run_dir / name)
        summary = run_dir / name / "analysis" / "summary.json"
        summary.write_text(json.dumps({**json.loads(summary.read_text()), "sut": name}))
        suts.append(run_dir / name)
    measured, console = evaluate(write_index(run_dir, suts), tmp_path, COLUMN_BOXES, window)
    assert console_errors(console) == []
    columns = measured["columns"]
    # each system's column, and the systems' spectrum below them
    assert [c["plots"] for c in columns] == [1, 1] and measured["plots"] == 3
    left, right = (c["box"] for c in columns)
    assert left[1] == right[1] and left[2] <= right[0], "the systems are side by side"
    for column in columns:
        assert column["svgs"], "every plot drawn"
        for svg in column["svgs"]:
            assert _inside(svg, column["box"]), (svg, column["box"])
        widest = max(svg[2] - svg[0] for svg in column["svgs"])
        assert widest >= 0.95 * (column["box"][2] - column["box"][0]), "the plot fills it"


# Every plot of a page: the box of the page's body and of the plot's SVG layers.
PLOT_BOXES = """Array.from(document.querySelectorAll('.js-plotly-plot')).map(function (plot) {
  function box(element) {
    var b = element.getBoundingClientRect();
    return [b.left, b.top, b.right, b.bottom];
  }
  return {
    id: plot.id,
    body: box(document.body),
    svgs: Array.from(plot.querySelectorAll('.main-svg')).map(box)
  };
})"""


def test_the_report_plots_fit_a_narrow_window(reports, tmp_path):
    _, report, _ = reports
    plots, console = evaluate(report, tmp_path, PLOT_BOXES, (700, 1600))
    assert console_errors(console) == []
    assert {"six-series", "latency-points", "sender-health", "resources"} <= {
        p["id"] for p in plots
    }
    for plot in plots:
        body = plot["body"]
        assert plot["svgs"] and all(_inside(svg, body) for svg in plot["svgs"]), plot
        assert max(svg[2] - svg[0] for svg in plot["svgs"]) >= 0.95 * (body[2] - body[0]), plot


def test_compare_two_runs(spark, tmp_path):
    root = tmp_path / "runs"
    first, _ = craft(root)
    second_run = first.parent.rename(root / "run-y-p")
    craft(root)  # run-x-p again, beside run-y-p
    analyze(spark, [root / "run-x-p" / "direct", second_run / "direct"], AnalyzeOptions())
    rows = comparison_rows([root / "run-x-p", second_run])
    assert [(r["run"], r["sut"], r["breaking_point_per_s"]) for r in rows] == [
        ("run-x-p", "direct", 400),
        ("run-y-p", "direct", 400),
    ]
    rows = with_changes(rows)
    text = comparison_text(rows)
    assert "direct" in text and text.count("breaks at 400/s, max sustainable 200/s, e2e") == 2
    assert "fault" not in text
    # the same records analysed twice: the same capacity and intervals, nothing to call
    calls = [" ".join(line.split()) for line in calls_text(rows).splitlines()]
    assert calls[0] == "direct: run-y-p against run-x-p: indistinguishable"
    assert "max sustainable 200/s 200/s +0/s indistinguishable" in calls
    steps = [line for line in calls if line.startswith(("1 200/s", "2 400/s"))]
    assert [line.split(" P50 ")[0] for line in steps] == [
        "1 200/s holds -> holds",
        "2 400/s breaks -> breaks",
    ]
    assert all(line.endswith(" indistinguishable") for line in steps)
    page = write_comparison(rows, root / "compare.html")
    dom, console = render(page, tmp_path)
    assert console_errors(console) == []
    assert drawn(dom, "comparison") and "<th>faults</th>" not in dom
    assert "direct: run-y-p against run-x-p: indistinguishable" in dom
    assert drawn(dom, "spectrum-compared")  # each system's e2e spectrum in each run
    # run-y-p had a fault (as its summary.json tells it): its figures beside run-x-p's none
    summary_path = second_run / "direct" / "analysis" / "summary.json"
    summary = json.loads(summary_path.read_text())
    fault = {"spec": "1@2s:kill:x:1s", "step": 1, "action": "kill", "target": "x", "at_s": 2.0,
             "back_s": 3.3, "error": None, "recovered_after_s": 1.99, "window_scheduled": 2000,
             "window_send_failures": 1270, "window_lost": 0, "window_peak_e2e_p99_ms": 8.0,
             "band_ms": 9.0, "step_send_failures": 1270, "step_lost": 0,
             "step_duplicates": 0, "window_late": 0, "text": "kill x"}  # fmt: skip
    summary_path.write_text(json.dumps({**summary, "faults": [fault]}))
    rows = comparison_rows([root / "run-x-p", second_run])
    brief = "1 fault: recovered in 2.0 s; 1,270 failed, 0 lost, 0 duplicates, 0 late"
    (line,) = [line for line in comparison_text(rows).splitlines() if line.startswith("direct")]
    assert line.count(brief) == 1 and line.index(brief) > line.index("|", line.index("|") + 1)
    dom, console = render(write_comparison(rows, root / "compare.html"), tmp_path)
    assert console_errors(console) == [] and "<th>faults</th>" in dom
    assert re.findall(r"<td class=.text.>(\d fault[^<]*)</td>", dom) == [brief]  # y's alone
    index, console = render(write_index(second_run, [second_run / "direct"]), tmp_path)
    assert console_errors(console) == [] and brief in index and "<th>faults</th>" in index
    with pytest.raises(EvbenchError, match="evbench analyze"):
        comparison_rows([tmp_path])


def test_imported_2019_results_are_analysed_and_reported(spark, tmp_path):
    from evbench.knative import import_knative
    from tests.evbench.test_knative import _processed_dir

    source, published, delivered, failed = _processed_dir(tmp_path)
    sut = import_knative(source, tmp_path / "runs", "run-2", "channel-imc", [100, 200])
    (summary,) = analyze(spark, [sut], AnalyzeOptions())
    counts = summary["counts"]
    assert counts["send_failures"] == failed and counts["acked"] == published
    assert counts["received"] == delivered and counts["lost"] == published - delivered
    e2e = summary["latency_ms"]["e2e"]
    assert e2e["n"] == delivered and 20 <= e2e["p50"] <= 30  # intended = sent in 2019 data
    dom, console = render(write_report(sut), tmp_path)
    assert console_errors(console) == []
    assert drawn(dom, "six-series")


# Names a hand-made directory (or an older version) can have; validation keeps new ones out.
# (No "error" in them: the console lines a test scans for errors name the page's path.)
BREAKOUT = 'a"><svg onload="document.title=\'pwned\'">'  # out of an attribute
SCHEME = "javascript:document.title='pwned'"  # a link that would run when clicked
SCRIPT = "<script>document.title='pwned'</script><b>bold'\"&"


def _title(dom):
    return html.unescape(re.search(r"<title>(.*?)</title>", dom, re.S).group(1))


def _hostile_copy(analysed_sut, run_dir, name):
    """The analysed crafted SUT under a hostile directory name and SUT name."""
    sut = run_dir / name
    shutil.copytree(analysed_sut, sut)
    path = sut / "analysis" / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "sut": SCRIPT + name, "run_id": SCRIPT}))
    return sut


def test_hostile_names_are_shown_and_never_run(reports, tmp_path):
    root, _, _ = reports
    run_dir = tmp_path / "runs" / ("run-" + BREAKOUT)
    suts = [_hostile_copy(root / "run-x-p" / "direct", run_dir, n) for n in (BREAKOUT, SCHEME)]
    index = write_index(run_dir, suts)
    dom, console = render(index, tmp_path)
    assert _title(dom) == run_dir.name  # the injected scripts would have set it to 'pwned'
    assert console_errors(console) == []
    assert "<svg onload" not in dom and "<b>bold" not in dom  # no element made from a name
    assert drawn(dom, "six-0") and drawn(dom, "six-1")  # ids by position, names nowhere in them
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom  # shown as typed
    hrefs = re.findall(r'<a href="([^"]*report\.html)"', dom)
    assert len(hrefs) == 2 and not any(re.match(r"[a-z][a-z0-9+.-]*:", h, re.I) for h in hrefs)
    dom, console = render(write_report(suts[0]), tmp_path)
    assert _title(dom) == f"{SCRIPT} · {SCRIPT + BREAKOUT} · p"
    assert console_errors(console) == []
    assert "<svg onload" not in dom and drawn(dom, "six-series")


def test_objectives_are_judged_on_the_analysis_and_shown_in_the_report(reports, spark, tmp_path):
    from analysis.objectives import parse_objectives
    from evbench.campaign import OBJECTIVE_BREACHED
    from evbench.commands.analyze import _exit_codes

    root, _, _ = reports
    sut = tmp_path / "run-x-p" / "direct"
    shutil.copytree(root / "run-x-p" / "direct", sut)
    # the crafted run breaks at 400/s and sustains 200/s
    objectives = parse_objectives("max-sustainable>=200,breaking-point>=1000,step:lost<=10%")
    (summary,) = analyze(spark, [sut], AnalyzeOptions(objectives=objectives))
    on_disk = json.loads((sut / "analysis" / "summary.json").read_text())
    assert on_disk["objectives"] == summary["objectives"]
    assert [(o["objective"], o["met"]) for o in summary["objectives"]] == [
        ("max-sustainable>=200", True), ("breaking-point>=1000", False), ("step:lost<=10%", True)
    ]  # fmt: skip
    assert summary["objectives"][1]["text"] == "breaking-point>=1000: BREACHED (the run: 400/s)"
    assert _exit_codes([summary]) == [OBJECTIVE_BREACHED]
    dom, console = render(write_report(sut), tmp_path)
    assert console_errors(console) == []
    assert "Objectives: 1 of 3 breached" in dom
    assert '<li class="breaks">breaking-point&gt;=1000: BREACHED (the run: 400/s)</li>' in dom
