"""The live lines (evbench.progress): failures said with their causes."""

from evbench.progress import progress_line, step_line


def _progress(**over):
    doc = {
        "event": "progress",
        "step": 1,
        "target_rate_per_s": 1000,
        "window_sent": 1000,
        "lag_p99_ms": 0.5,
        "sent": 1000,
        "ok": 0,
        "failures": 1000,
        "inflight": 0,
        "inflight_cap_refused": 0,
        "rows_written": 0,
    }
    doc.update(over)
    return doc


def test_a_progress_line_says_its_failures_by_cause():
    line = progress_line(_progress(failures_by_cause={"connection refused": 1000}), 12, 0)
    assert "failures  1000 (connection refused 1000)" in line


def test_no_failures_no_causes_and_an_older_sender_reads():
    assert "failures     0  in flight" in progress_line(_progress(failures=0), 12, 0)
    assert "failures  1000  in flight" in progress_line(_progress(), 12, 0)


def test_a_step_line_says_the_caps_refusals_among_the_causes():
    doc = {
        **_progress(),
        "event": "step_end",
        "achieved_send_rate_per_s": 1000.0,
        "failures": 8339,
        "failures_by_cause": {"in-flight cap": 5790, "timeout": 2549},
    }
    line = step_line(doc, 12, 5)
    assert "failures  8339 (in-flight cap 5790, timeout 2549)  received 5" in line


def test_a_progress_line_says_when_others_crowd_the_host():
    from analysis.hostload import HostLoad
    from analysis.verdicts import Thresholds
    from evbench.progress import host_note

    busy = HostLoad(cpus=2, busy_ratio=0.99, others_ratio=0.52, steal_ratio=0.0, samples=3)
    own = HostLoad(cpus=2, busy_ratio=0.99, others_ratio=0.03, steal_ratio=0.0, samples=3)
    note = host_note(busy, Thresholds())
    assert note == "HOST SATURATED: host 99% busy, 52% by processes outside the run, of 2 CPUs"
    assert progress_line(_progress(), 12, 0, note).endswith(f"received 0  {note}")
    assert host_note(own, Thresholds()) == "" and host_note(None, Thresholds()) == ""
