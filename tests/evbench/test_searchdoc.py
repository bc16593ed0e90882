"""The search's last words (pure): its answer, and what it means when probes had faults; a probe
an interrupt cut short, as run.json lists it."""

from __future__ import annotations

from pathlib import Path

import pytest

from evbench.options import SearchOptions
from evbench.searchdoc import Probed, cut_probed, result_line, search_doc
from evbench.searchplan import Probe, Resolution, Result, SearchPlan

_OPTS = SearchOptions(runs_dir=Path("runs"), plan=SearchPlan(100, 400, Resolution(per_s=10)))


@pytest.mark.parametrize(
    ("faulted", "says"),
    [
        (False, "max sustainable rate 800/s (held 800/s, broke 1000/s) after 5 probes in 1.5 min"),
        (True, "highest rate recovered from its faults at 800/s (held 800/s, broke 1000/s)"),
    ],
)
def test_the_answer_says_what_was_found(faulted, says):
    result = Result(800, 800, 1000, "800/s held for the 120 s confirmation", probes=5)
    assert result_line(result, 1.5, faulted).startswith(says)


def test_a_search_without_an_answer_says_why():
    result = Result(None, None, 200, "gave up after 1 probes without a confirmed rate", probes=1)
    assert result_line(result, 0.2, True) == (
        "search ended after 1 probes in 0.2 min: gave up after 1 probes without a confirmed rate"
    )


def test_a_probe_cut_short_is_listed_not_judged_with_what_it_sent():
    step = {"scheduled": 2700, "achieved_send_rate_per_s": 299.1}
    done = {"start_ns": 5_000, "sent": 2700, "steps": [step]}
    cut = cut_probed(Probe(300, 60), 3, done)
    (doc,) = search_doc(_OPTS, [cut], None, 0)["probes"]
    assert doc["cut_short"] and doc["verdict"] == "not-judged" and doc["step"] == 3, doc
    assert doc["reasons"] == [
        "cut short after 9.0 s of 60 s: the search was interrupted; a probe cut short is not judged"
    ]
    assert (doc["start_ns"], doc["e2e_p99_ms"], doc["sender_ratio"]) == (5_000, None, 0.997)
    assert cut.sender is done  # counted in the sender summary as a whole probe's line is


def test_a_whole_probe_is_not_marked():
    figures = {"e2e_p99_ms": 2.0, "sender_ratio": 1.0}
    whole = Probed(Probe(300, 60), 1, 5_000, "holds", (), figures, {}, None)
    (doc,) = search_doc(_OPTS, [whole], None, 0)["probes"]
    assert "cut_short" not in doc, doc
