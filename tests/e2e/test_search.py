"""The capacity search against systems of known capacity (real processes on loopback)."""

from __future__ import annotations

import json

import pytest

from evbench.search import SearchOptions, search
from evbench.searchplan import Resolution, SearchPlan
from evbench.shared.documents import RunDoc, problems
from evbench.shared.parquet import read_parts
from evbench.shared.records import SENT_FIELDS
from loadgen.settings import SendKnobs
from suts.driver import Sut

pytestmark = pytest.mark.e2e


class Capacity(Sut):
    """A hop that forwards at most `rate` events/s to the receiver, with a bounded queue."""

    name = "capacity"
    summary = "test system of known capacity"
    topology = "sender -> capacity hop -> receiver"
    rate = 0

    def _start(self, subscriber: str) -> str:
        return self._component(
            "hop", "capacity", "--subscriber", subscriber, "--rate", str(self.rate),
            "--queue-limit", "300",
        )  # fmt: skip


# Off the probe grid (100, 200, 400, ... and their midpoints): a capacity probed exactly has no
# headroom, and any stall would read as a rise.
@pytest.mark.parametrize("capacity", [330, 730])
def test_the_search_brackets_a_known_capacity(tmp_path, capacity):
    def make(name, lab, logs, run_id, host="127.0.0.1"):
        system = Capacity(lab, logs, run_id, host)
        system.rate = capacity
        return system

    resolution = Resolution(fraction=0.10)
    opts = SearchOptions(
        sut="capacity",
        plan=SearchPlan(100, 5000, resolution, probe_s=3, confirm_s=6),
        runs_dir=tmp_path,
        run_id="s",
        send=SendKnobs(payload_bytes=1024),
        settle_s=1.0,
        grace_s=2.0,
    )
    lines: list[str] = []
    sut_dir, result = search(opts, lines.append, make=make)
    assert result is not None, lines
    assert result.highest_hold_per_s <= capacity < result.lowest_break_per_s, lines
    assert result.max_sustainable_per_s == result.highest_hold_per_s
    assert resolution.gap_ok(result.highest_hold_per_s, result.lowest_break_per_s)
    # the whole search is one run: every probe a step, in run.json and in the records
    run = json.loads(sut_dir.run_json.read_text())
    assert problems(run, RunDoc) == [] and run["status"] == "completed"
    probes = run["search"]["probes"]
    assert len(probes) == result.probes == len(run["pace"]["steps"])
    assert probes[-1]["confirm"] and probes[-1]["verdict"] == "holds"
    steps = {r["step"] for r in read_parts(sut_dir.sent, SENT_FIELDS).to_pylist()}
    assert steps == set(range(1, len(probes) + 1))
