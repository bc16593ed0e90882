"""The report's System metrics and Profiles sections, built without a browser or Spark: the
figure a metric gets, the endpoints' table, the profiles' links (only to files inside the
system's directory) and the sections' absence when a run has nothing to show."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from analysis.insight import Series
from analysis.insight_figures import metric_plot, x_range
from analysis.insight_html import profiles_section, scrape_table, system_sections
from contract.insight import ProfileDoc, ScrapeDoc
from contract.layout import SutDir

STEPS = [
    {"step": 1, "target_rate_per_s": 200, "verdict": "holds"},
    {"step": 2, "target_rate_per_s": 400, "verdict": "breaks"},
]
SPANS = {1: (0, 9), 2: (12, 21)}
HOSTILE = "<script>document.title='pwned'</script>"


def _summary():
    return {"schedule_start_ns": 0, "steps": STEPS}


def test_no_sections_for_a_run_that_scraped_and_profiled_nothing(tmp_path):
    layout = SutDir(tmp_path / "sut")
    layout.root.mkdir()
    layout.run_json.write_text(json.dumps({"run_id": "r", "sut": "direct"}))
    assert system_sections(layout, _summary(), []) == ""
    layout.run_json.write_text(json.dumps({"run_id": "r", "scrapes": [], "profiles": []}))
    assert system_sections(layout, _summary(), []) == ""


def test_a_metric_plot_has_a_line_per_endpoint_and_labels_over_the_steps():
    lines = [
        Series("dispatched_total", "counter", "api", "", "rate", [1.0, 2.0], [None, 5.0], 1),
        Series("dispatched_total", "counter", "q", '{p="<b>"}', "rate", [1.0, 2.0], [None, 6.0]),
    ]
    figure = metric_plot(lines, STEPS, SPANS, x_range([lines], SPANS))
    assert [(t.name, list(t.x), list(t.y)) for t in figure.data] == [
        ("api", [1.0, 2.0], [None, 5.0]),
        ('q {p="&lt;b&gt;"}', [1.0, 2.0], [None, 6.0]),  # escaped for Plotly
    ]
    assert all(t.connectgaps is False for t in figure.data)
    bands = [(s.x0, s.x1) for s in figure.layout.shapes]
    assert bands == [(0, 10), (12, 22)]
    assert [a.text for a in figure.layout.annotations] == ["step 1: 200/s", "step 2: 400/s"]
    assert figure.layout.title.text == (
        "dispatched_total (counter, per-second rate) · 1 counter resets (gaps)"
    )
    assert tuple(figure.layout.xaxis.range) == (0.0, 22.0)
    assert figure.layout.xaxis.title.text == "seconds since the schedule start"


def test_the_scrape_table_marks_failures_and_escapes_what_endpoints_said():
    scrapes = [
        ScrapeDoc(
            name="dispatcher",
            url="http://127.0.0.1:9/metrics",
            interval_s=1.0,
            origin="lab",
            scrapes=30,
            failures=2,
            samples=900,
            slowest_s=0.25,
            first_error="connect refused",
            last_error=HOSTILE,
        ),
        ScrapeDoc(
            name="api",
            url="http://x/metrics?a=1&b=2",
            interval_s=1.0,
            origin="user",
            scrapes=30,
            failures=0,
            samples=10,
            slowest_s=0.01,
            first_error=None,
            last_error=None,
        ),
    ]
    table = scrape_table(scrapes)
    assert table.count("<tr class='scrape-failed'>") == 1
    assert "<script>" not in table and "&lt;script&gt;" in table
    assert "http://x/metrics?a=1&amp;b=2" in table and "0.250" in table
    assert "no scrape endpoints" in scrape_table([])


def _profile(target, kind, files, **more):
    doc = ProfileDoc(
        step=2,
        kind=kind,
        target=target,
        started_ns=0,
        duration_s=10.0,
        wall_s=11.25,
        files=files,
        error=None,
    )
    doc.update(more)
    return doc


def test_profiles_link_their_files_from_the_report_and_nothing_outside(tmp_path):
    layout = SutDir(tmp_path / "sut")
    step = layout.step_profiles(2)
    step.mkdir(parents=True)
    names = ["dispatcher.svg", "dispatcher.speedscope.json", "dispatcher.raw.txt", "api.cpu.pb.gz"]
    for name in names:
        (step / name).write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (tmp_path / "outside.svg").write_text("secret")
    profiles = [
        _profile(
            "dispatcher",
            "py-spy",
            [f"profiles/step-2/{n}" for n in names[:3]],
            pid=42,
            samples=1000,
        ),
        _profile(
            "api",
            "pprof-cpu",
            ["profiles/step-2/api.cpu.pb.gz"],
            open_with="go tool pprof -http=: profiles/step-2/api.cpu.pb.gz",
        ),
        _profile(
            HOSTILE,
            "pprof-heap",
            ["../outside.svg", str(tmp_path / "outside.svg"), "profiles/step-2/gone.svg"],
            error=HOSTILE,
            duration_s=0.0,
        ),
        _profile("late", "py-spy", [], step=3, error="py-spy: permission denied"),
    ]
    section = profiles_section(layout, profiles, STEPS)
    assert "<h3>Step 2: 400/s</h3>" in section and "<h3>Step 3</h3>" in section
    hrefs = re.findall(r"href='([^']*)'", section)
    local = [h for h in hrefs if not h.startswith("https://")]
    assert sorted(local) == sorted(f"../profiles/step-2/{n}" for n in names)
    assert all((layout.analysis / unquote(h)).resolve().is_file() for h in local)
    assert re.findall(r"<img class='flame' src='([^']*)'", section) == [
        "../profiles/step-2/dispatcher.svg"
    ]
    assert "open in <a href='https://www.speedscope.app'" in section
    assert "<code>go tool pprof -http=: profiles/step-2/api.cpu.pb.gz</code>" in section
    assert "10 s asked, took 11.2 s · 1000 stacks sampled · pid 42" in section
    assert "a snapshot, took 11.2 s" in section
    assert section.count("(missing or outside the directory)") == 3
    assert "<script>" not in section and "failed: &lt;script&gt;" in section
    assert "failed: py-spy: permission denied" in section
    assert profiles_section(layout, [], STEPS) == ""
