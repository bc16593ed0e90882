"""The System metrics and Profiles sections in a real report, opened in headless Chromium: the
analysed crafted run (tests/analysis/conftest.py, shared with test_report.py) given what a run
that scraped and profiled writes — samples/metrics/ parts, run.json's scrapes and profiles, the
profile files — and its report written again."""

from __future__ import annotations

import json
import shutil
from urllib.parse import unquote

import pytest

from analysis.report import write_report
from contract.insight import ProfileDoc, ScrapeDoc
from contract.layout import SutDir
from contract.records import METRIC_SAMPLE_FIELDS, MetricSampleRow
from runtime.parquet import PartWriter
from tests.analysis.crafted import STEPS, T0
from tests.browser import console_errors, evaluate

pytestmark = pytest.mark.browser

S = 1_000_000_000
DEAD_S = range(12, 16)  # the api endpoint answers nothing in these seconds
FLAME_SVG = (
    "<svg xmlns='http://www.w3.org/2000/svg' width='300' height='40'>"
    "<rect width='300' height='40' fill='#e8a33d'/><text x='4' y='25'>main</text></svg>"
)

# What the page shows of its system metrics and profiles: each plot's title and lines as
# Plotly holds them, the step annotations of the first, every link and how each flame graph
# image loaded.
INSIDE = """{
  plots: Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(function (div) { return div.id.indexOf('system-metric-') === 0; })
    .map(function (div) {
      return {
        id: div.id,
        title: div.layout.title.text,
        svgs: div.querySelectorAll('.main-svg').length,
        lines: div.data.map(function (t) { return {name: t.name, y: Array.from(t.y)}; })
      };
    }),
  bands: Array.from(document.querySelectorAll('#system-metric-0 .annotation-text'))
    .map(function (a) { return a.textContent; }),
  links: Array.from(document.querySelectorAll('a')).map(function (a) {
    return a.getAttribute('href');
  }),
  flames: Array.from(document.querySelectorAll('img.flame')).map(function (img) {
    return img.complete ? img.naturalWidth : -1;
  }),
  headings: Array.from(document.querySelectorAll('h2, h3')).map(function (h) {
    return h.textContent;
  })
}"""


def _scraped(sut: SutDir) -> list[ScrapeDoc]:
    """30 s of scrapes of two endpoints: the dispatcher's counter follows the pace (200/s, then
    400/s after the 2 s gap), its queue grows in step 2; the api is down for DEAD_S."""
    docs = []
    for endpoint in ("dispatcher", "api"):
        writer = PartWriter(sut.scraped_metrics, METRIC_SAMPLE_FIELDS, prefix=f"metrics-{endpoint}")
        dispatched = 0.0
        for second in range(30):
            t_ns = T0 + second * S
            up = endpoint != "api" or second not in DEAD_S
            if up:
                dispatched += 200 if second < 10 else 400 if 12 <= second < 22 else 0
                queue = max(0, second - 12) * 50.0
                for row in (
                    ("events_dispatched_total", "counter", "", dispatched),
                    ("dispatch_queue_depth", "gauge", '{queue="main"}', queue),
                    ("http_requests_total", "counter", "", 1.0 * second),
                ):
                    writer.append(MetricSampleRow(t_ns, endpoint, *row))
            writer.append(MetricSampleRow(t_ns, endpoint, "up", "gauge", "", float(up)))
            writer.append(
                MetricSampleRow(t_ns, endpoint, "scrape_duration_seconds", "gauge", "", 0.004)
            )
            writer.flush()  # a part a second, as a long run writes many
        failures = len(DEAD_S) if endpoint == "api" else 0
        docs.append(
            ScrapeDoc(
                name=endpoint,
                url=f"http://127.0.0.1:9/{endpoint}/metrics",
                interval_s=1.0,
                origin="lab" if endpoint == "dispatcher" else "user",
                scrapes=30,
                failures=failures,
                samples=3 * (30 - failures),
                slowest_s=0.004,
                first_error="connection refused" if failures else None,
                last_error="connection refused" if failures else None,
            )
        )
    return docs


def _profiled(sut: SutDir) -> list[ProfileDoc]:
    step = sut.step_profiles(2)
    step.mkdir(parents=True)
    (step / "dispatcher.svg").write_text(FLAME_SVG)
    (step / "dispatcher.speedscope.json").write_text('{"profiles": []}')
    (step / "dispatcher.raw.txt").write_text("main;dispatch 12\n")
    (step / "api.cpu.pb.gz").write_bytes(b"\x1f\x8b not really")
    common = {"step": 2, "started_ns": T0 + 13 * S, "duration_s": 5.0, "error": None}
    return [
        ProfileDoc(
            **common,
            kind="py-spy",
            target="dispatcher",
            wall_s=5.4,
            files=[f"profiles/step-2/dispatcher.{ext}" for ext in ("svg", "speedscope.json")]
            + ["profiles/step-2/dispatcher.raw.txt"],
            pid=4242,
            samples=500,
        ),
        ProfileDoc(
            **common,
            kind="pprof-cpu",
            target="api",
            wall_s=5.1,
            files=["profiles/step-2/api.cpu.pb.gz"],
            url="http://127.0.0.1:9/debug/pprof/profile?seconds=5",
            open_with="go tool pprof -http=: profiles/step-2/api.cpu.pb.gz",
        ),
    ]


def test_the_report_shows_system_metrics_and_profiles(analysed_run, tmp_path):
    _, analysed = analysed_run
    sut = SutDir(tmp_path / "runs" / "run-x-p" / "direct")
    shutil.copytree(analysed, sut.root)
    run = json.loads(sut.run_json.read_text())
    run.update(scrapes=_scraped(sut), profiles=_profiled(sut))
    sut.run_json.write_text(json.dumps(run))

    found, console = evaluate(write_report(sut.root), tmp_path, INSIDE, (1280, 1600))
    assert console_errors(console) == []
    plots = {p["title"].split(" ")[0]: p for p in found["plots"]}
    # the default choice (dispatched, queue), then the api's up and scrape duration: it failed
    assert list(plots) == [
        "dispatch_queue_depth",
        "events_dispatched_total",
        "up",
        "scrape_duration_seconds",
    ]
    assert all(p["svgs"] for p in found["plots"]), "every plot drawn"
    rates = {line["name"]: line["y"] for line in plots["events_dispatched_total"]["lines"]}
    assert rates["dispatcher"][1:10] == [200] * 9 and rates["dispatcher"][13:22] == [400] * 9
    (up,) = plots["up"]["lines"]
    assert up["name"] == "api" and up["y"][12:16] == [0, 0, 0, 0]
    assert found["bands"] == [f"step {n}: {rate}/s" for n, (rate, _) in enumerate(STEPS, 1)]
    assert {"System metrics", "Scrape endpoints", "Profiles", "Step 2: 400/s"} <= set(
        found["headings"]
    )

    local = [h for h in found["links"] if h.startswith("../profiles/")]
    assert len(local) == 4
    assert all((sut.analysis / unquote(h)).resolve().is_file() for h in local), local
    assert "https://www.speedscope.app" in found["links"]
    assert found["flames"] == [300], "the flame graph is shown in the page"
    text = sut.report_html.read_text()
    assert "go tool pprof -http=: profiles/step-2/api.cpu.pb.gz" in text
    assert "connection refused" in text

    # --plot-metric names what to plot instead
    chosen = write_report(sut.root, plot_metrics=["http_requests", "nothing_*"]).read_text()
    assert "http_requests_total (counter, per-second rate)" in chosen
    assert "events_dispatched_total (counter" not in chosen
    assert "--plot-metric nothing_* matched no plotted metric" in chosen
