"""The pure parts of looking inside a system: reading an exposition, the flags' values, and
when a profile runs."""

from __future__ import annotations

import argparse

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from evbench.profiles import (
    PprofTarget,
    ProfileRequest,
    pprof_target,
    profile_request,
    profile_window,
)
from evbench.scrape import canonical_labels, parse_exposition, scrape_target, scraper_rows
from runtime.argtypes import http_url, named_url


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({}, ""),
        ({"b": "y", "a": "x"}, '{a="x",b="y"}'),
        ({"a": 'say "hi"'}, '{a="say \\"hi\\""}'),
        ({"a": "back\\slash\nnew"}, '{a="back\\\\slash\\nnew"}'),
    ],
)
def test_labels_have_one_spelling(labels: dict[str, str], expected: str) -> None:
    assert canonical_labels(labels) == expected


def test_an_exposition_written_by_the_client_library_reads_back_whole() -> None:
    registry = CollectorRegistry()
    consumed = Counter("consumed", "events", ["partition"], registry=registry)
    consumed.labels("0").inc(3)
    consumed.labels("1").inc(5)
    Gauge("queue_depth", "waiting", registry=registry).set(7)
    rows = parse_exposition(generate_latest(registry).decode(), "lab", 42)
    got = {(r.metric, r.kind, r.labels): r.value for r in rows}
    assert got[("consumed_total", "counter", '{partition="0"}')] == 3
    assert got[("consumed_total", "counter", '{partition="1"}')] == 5
    assert got[("queue_depth", "gauge", "")] == 7
    assert {r.endpoint for r in rows} == {"lab"} and {r.t_ns for r in rows} == {42}


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # Go's client_golang: the TYPE line names the sample itself.
        ("# TYPE http_requests_total counter\nhttp_requests_total 4\n", "counter"),
        # The family's name on the TYPE line and a _total sample: the declared type holds.
        ("# TYPE foo counter\nfoo_total 4\n", "counter"),
        ("# TYPE consumed_msg_count gauge\nconsumed_msg_count 4\n", "gauge"),
        ("bare 4\n", "unknown"),
    ],
)  # fmt: skip
def test_a_sample_keeps_the_type_its_endpoint_declared(text: str, kind: str) -> None:
    (row,) = parse_exposition(text, "x", 0)
    assert (row.kind, row.value) == (kind, 4)


@pytest.mark.parametrize("body", ["<html>not metrics</html>", "foo{{{ 1", "x one"])
def test_a_body_the_parser_refuses_is_refused_whole(body: str) -> None:
    with pytest.raises(ValueError):
        parse_exposition(body, "x", 0)


@pytest.mark.parametrize(("up", "value"), [(True, 1.0), (False, 0.0)])
def test_every_attempt_leaves_up_and_its_duration(up: bool, value: float) -> None:
    rows = scraper_rows("svc", 7, up, 0.25)
    assert [(r.metric, r.value) for r in rows] == [("up", value), ("scrape_duration_seconds", 0.25)]


@pytest.mark.parametrize(
    ("text", "name", "url"),
    [
        ("d=http://10.0.0.7:8081/metrics", "d", "http://10.0.0.7:8081/metrics"),
        ("http://10.0.0.7:8081/metrics", "10.0.0.7-8081", "http://10.0.0.7:8081/metrics"),
        ("https://svc.example/m?x=1", "svc.example-https", "https://svc.example/m?x=1"),
        ("http://[::1]:9090/metrics", "1-9090", "http://[::1]:9090/metrics"),
    ],
)
def test_a_scrape_target_is_named(text: str, name: str, url: str) -> None:
    target = scrape_target(text)
    assert (target.name, target.url, target.origin) == (name, url, "user")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("notaurl", "not an http"),
        ("d=ftp://h/m", "not an http"),
        ("http://:80/", "no usable host"),
        ("http://h:70000/", "no usable host"),
        ("=http://h/", "name before '=' is empty"),
        ("../x=http://h/", "not an http"),  # a path in the name makes it no name at all
        (".hidden=http://h/", "scrape name"),
    ],
)
def test_a_bad_scrape_target_is_named_in_the_error(text: str, said: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=said):
        scrape_target(text)


def test_urls_are_checked_once_for_every_flag() -> None:
    assert http_url("http://h:1/") == "http://h:1/"
    assert named_url("api=http://h:8008/debug/pprof") == ("api", "http://h:8008/debug/pprof")


@pytest.mark.parametrize(
    ("text", "request_"),
    [
        ("2", ProfileRequest(2, None)),
        ("2:10", ProfileRequest(2, 10)),
        ("0:1", ProfileRequest(0, 1)),
    ],
)
def test_a_profile_request_reads(text: str, request_: ProfileRequest) -> None:
    assert profile_request(text) == request_


@pytest.mark.parametrize("text", ["", "x", "2:", "2:0", "-1", "2:1.5", "²", "2:x"])
def test_a_bad_profile_request_says_the_form(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        profile_request(text)


def test_a_pprof_target_needs_its_name() -> None:
    assert pprof_target("api=http://h:8008/debug/pprof") == PprofTarget(
        "api", "http://h:8008/debug/pprof"
    )
    with pytest.raises(argparse.ArgumentTypeError, match="name it"):
        pprof_target("http://h:8008/debug/pprof")


_STEPS = [
    {"number": 1, "rate_per_s": 100, "duration_s": 5, "warmup": False, "start_offset_ns": 0,
     "first_seq": 0},
    {"number": 2, "rate_per_s": 200, "duration_s": 10, "warmup": False,
     "start_offset_ns": 6_000_000_000, "first_seq": 500},
]  # fmt: skip


@pytest.mark.parametrize(
    ("request_", "window"),
    [
        (ProfileRequest(2, None), (1_000 + 6_000_000_000, 10)),  # the whole step
        (ProfileRequest(2, 4), (1_000 + 6_000_000_000, 4)),
        (ProfileRequest(1, 30), (1_000, 5)),  # cut to the step: never into the next one
        (ProfileRequest(3, None), None),  # a probe of a search that has not come yet
    ],
)
def test_a_profile_runs_inside_its_step(
    request_: ProfileRequest, window: tuple[int, int] | None
) -> None:
    assert profile_window(request_, 1_000, _STEPS) == window  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("sut", "profile", "pprof", "steps", "said"),
    [
        ("channel-imc", "2", False, (1, 3), None),
        ("channel-imc", "0", False, (0, 3), None),  # the warm-up of a run that has one
        ("channel-imc", "0", False, (1, 3), "steps are 1..3"),
        ("channel-imc", "4", False, (1, 3), "steps are 1..3"),
        ("channel-imc", "0", False, (1, None), "steps are 1 on"),  # a search: no warm-up
        ("channel-imc", "40", False, (1, None), None),  # a search's 40th probe, if it comes
        ("direct", "2", False, (1, 3), "direct has no lab processes here to profile"),
        ("external", "2", False, (1, 3), "add --pprof NAME=URL"),
        ("external", "2", True, (1, 3), None),
    ],
)
def test_a_profile_is_checked_before_anything_starts(
    tmp_path, sut: str, profile: str, pprof: bool, steps: tuple[int, int | None], said: str | None
) -> None:
    from contract.errors import EvbenchError
    from evbench.insight import check_profile
    from evbench.options import SessionOptions

    opts = SessionOptions(
        runs_dir=tmp_path,
        sut=sut,
        profile=profile_request(profile),
        pprof=(pprof_target("api=http://h:8008/debug/pprof"),) if pprof else (),
    )
    if said is None:
        check_profile(opts, *steps)
    else:
        with pytest.raises(EvbenchError, match=said):
            check_profile(opts, *steps)
