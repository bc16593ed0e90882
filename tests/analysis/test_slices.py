"""A step cut into slices (analysis.slices) gives the figures of the step read whole, and P99.99
is the exact order statistic at any size: the tasks and the driver's merge, without Spark."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import tasks as tasks_module
from analysis.compact import compact_received
from analysis.digests import QUANTILES, tail_figures
from analysis.job import from_steps
from analysis.sentindex import index_sent
from analysis.slices import key_of, slice_keys, slice_seconds, top_count
from analysis.steps import StepContext
from analysis.tasks import plan, run
from contract.records import RECEIVED_FIELDS, SENT_FIELDS
from runtime.parquet import arrow_schema

S = 1_000_000_000
T0 = 1_700_000_000 * S
RATE = 1000
SECONDS = 60


def _write_run(root, rng, spikes_every=10_000):
    """One step at RATE/s for SECONDS s, a part per second per side; e2e mostly a few ms with
    an 80 ms spike on one event in `spikes_every`, losses, duplicates and a foreign id."""
    (root / "sent").mkdir(parents=True)
    (root / "received").mkdir()
    n = RATE * SECONDS
    seqs = np.arange(n)
    intended = T0 + seqs * S // RATE
    e2e = rng.gamma(4, 500_000, n).astype(np.int64)
    e2e[rng.permutation(n)[: n // spikes_every]] += 80_000_000
    lost = rng.random(n) < 0.001
    ids = np.char.add("x-0-", seqs.astype(str))
    for second in range(SECONDS):
        at = slice(second * RATE, (second + 1) * RATE)
        sent = {
            "event_id": ids[at],
            "seq": seqs[at],
            "step": np.ones(RATE, np.int32),
            "warmup": np.zeros(RATE, bool),
            "decoy": np.zeros(RATE, bool),
            "target_rate_per_s": np.full(RATE, RATE, np.int32),
            "intended_ns": intended[at],
            "sent_ns": intended[at] + 1000,
            "ack_ns": intended[at] + 500_000,
            "status": np.full(RATE, 202, np.int32),
            "error": pa.nulls(RATE, pa.string()),
            "worker": np.zeros(RATE, np.int32),
            "payload_bytes": np.full(RATE, 64, np.int32),
        }
        schema = arrow_schema(SENT_FIELDS)
        pq.write_table(pa.table(sent, schema=schema), root / "sent" / f"p-{second:04d}.parquet")
        kept = ~lost[at]
        got = ids[at][kept]
        when = (intended[at] + e2e[at])[kept]
        got = np.concatenate([got, got[:3], [f"foreign-{second}"]])  # 3 duplicates a second
        when = np.concatenate([when, when[:3] + S, when[:1]])
        m = len(got)
        received = {
            "event_id": got,
            "received_ns": when,
            "receiver": np.full(m, "rx"),
            "payload_bytes": np.full(m, 64, np.int32),
            "ce_id": got,
            "ce_type": np.full(m, "t"),
            "ce_source": np.full(m, "s"),
            "subscriber": np.full(m, "/"),
        }
        table = pa.table(received, schema=arrow_schema(RECEIVED_FIELDS))
        pq.write_table(table, root / "received" / f"r-{second:04d}.parquet")
    return (e2e[~lost].astype(np.float64)) / 1e6


def _analysed(root, slice_events, staging):
    sent_parts = sorted((root / "sent").iterdir())
    received_parts = sorted((root / "received").iterdir())
    sent = index_sent(sent_parts, root / f"c{slice_events}" / "sent", T0, slice_events)
    assert sent.ranges is not None
    received = compact_received(received_parts, root / f"c{slice_events}" / "received", sent.ranges)
    planned = plan({"x": (sent, received)})
    context = StepContext({"x": T0}, {"x": S}, str(staging))
    rows = pa.concat_tables(run(task, context) for task in planned)
    kept = {(t.sut, s): t.top_k for t in planned for s in t.steps}
    return planned, from_steps(rows, context.start_ns, kept)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("sliced")
    values = _write_run(root, np.random.default_rng(7))
    whole = _analysed(root, 10**9, root / "staging-whole")
    # 1-second slices, 60 of them, each smaller than the top values its step keeps (1,024)
    sliced = _analysed(root, RATE // 2, root / "staging-sliced")
    return values, whole, sliced


@pytest.fixture(scope="module")
def straddled(tmp_path_factory):
    """The run of `analysed`, its sent/ one file whose row groups of 700 rows cut across the
    seconds (as a rolled part's flushes do across a slice's edge): sliced in seconds, and as
    one slice."""
    root = tmp_path_factory.mktemp("straddled")
    _write_run(root, np.random.default_rng(7))
    sent = pq.read_table(sorted((root / "sent").iterdir()))
    for part in (root / "sent").iterdir():
        part.unlink()
    pq.write_table(sent, root / "sent" / "all.parquet", row_group_size=700)
    return _analysed(root, RATE // 2, root / "staging-sliced")


def test_sent_read_in_place_keeps_each_slices_rows_where_row_groups_straddle(analysed, straddled):
    _, _, (sliced_tasks, sliced) = analysed
    tasks, found = straddled
    by_key = {t.keys: t for t in tasks if t.keys}
    assert sorted(by_key) == sorted(t.keys for t in sliced_tasks if t.keys)
    for keys, task in by_key.items():
        assert task.sent_slots is not None
        (_, groups), *others = task.sent
        assert not others and len(groups) >= 2  # a second spans two or three row groups
        assert tasks_module.sent_rows(task).num_rows == RATE, keys
    assert found.totals == sliced.totals
    assert found.foreign_counts == sliced.foreign_counts
    assert found.metrics == sliced.metrics
    assert found.points["x"].equals(sliced.points["x"])
    for key, (_, top) in sliced.step_sketch.items():
        assert np.array_equal(found.step_sketch[key][1], top), key


def test_the_step_is_cut_in_slices_of_whole_seconds(analysed):
    _, (whole_tasks, _), (sliced_tasks, _) = analysed
    assert sorted(t.keys for t in whole_tasks if t.keys) == [(key_of(1, 0),)]
    keys = sorted(t.keys[0] for t in sliced_tasks if t.keys)
    assert keys == [key_of(1, i) for i in range(SECONDS)]
    assert {t.top_k for t in sliced_tasks if t.keys} == {t.top_k for t in whole_tasks if t.keys}


def test_counts_series_and_points_equal_the_step_read_whole(analysed):
    _, (_, whole), (_, sliced) = analysed
    assert sliced.totals == whole.totals
    assert sliced.foreign_counts == whole.foreign_counts == {"x": SECONDS}
    assert sliced.metrics == whole.metrics
    # each second made by one slice, whole
    assert sorted(sliced.e2e_points["x"], key=_second) == sorted(whole.e2e_points["x"], key=_second)
    assert sliced.points["x"].equals(whole.points["x"])
    assert whole.totals["x"][0]["duplicates"] == 3 * SECONDS


def _second(row: dict) -> int:
    return row["second"]


def test_exact_tails_are_equal_and_digest_quantiles_within_their_rank_error(analysed):
    values, (_, whole), (_, sliced) = analysed
    ordered = np.sort(values)
    for key, (digest, top) in whole.step_sketch.items():
        merged_digest, merged_top = sliced.step_sketch[key]
        assert np.array_equal(merged_top, top), key
        exact = tail_figures(digest, top)
        found = tail_figures(merged_digest, merged_top)
        for name in exact["exact"]:
            assert found[name] == exact[name], (key, name)
        if key[1] != "e2e":
            continue
        for name, error in found["rank_error"].items():
            q = QUANTILES[name]
            low = ordered[max(0, int(np.floor((q - error) * len(ordered))) - 1)]
            high = ordered[min(len(ordered) - 1, int(np.ceil((q + error) * len(ordered))))]
            assert low <= found[name] <= high, (name, error)


def test_p9999_is_the_exact_order_statistic_where_a_digest_would_cross_the_gap(
    tmp_path, monkeypatch
):
    # The gap case, small: one e2e value in 10^4 is an 80 ms spike, so the P99.99 rank sits at
    # the edge of the spikes. With only 3 top values kept regardless of n (as 1,024 were past
    # ~10^7 samples), the digest's estimate interpolates across the gap.
    monkeypatch.setattr(tasks_module, "TOP_K", 3)
    monkeypatch.setattr(tasks_module, "TOP_MARGIN", 2)
    values = _write_run(tmp_path, np.random.default_rng(11), spikes_every=10_000)
    _, found = _analysed(tmp_path, 5 * RATE, tmp_path / "staging")
    digest, top = found.step_sketch[("x", "e2e", 1)]
    assert len(top) == top_count(len(values), 2)  # ceil(n / 10^4) + 2, whatever the slices
    tails = tail_figures(digest, top)
    assert "p9999" in tails["exact"]
    assert tails["p9999"] == round(float(np.quantile(values, 0.9999)), 4)


@pytest.mark.parametrize(
    ("rate", "events", "seconds"),
    [(1000, 1_000_000, 1000), (20_000, 1_000_000, 50), (2_000_000, 1_000_000, 1), (0, 5, 5)],
)
def test_slice_seconds(rate, events, seconds):
    assert int(slice_seconds(rate, events)) == seconds


def test_slice_keys_order_by_step_then_time_and_clip_early_stamps():
    keys = slice_keys(
        np.array([1, 1, 1, 2]),
        np.array([10, 10, 10, 10]),
        np.array([T0 - S, T0 + 1 * S, T0 + 2 * S, T0]),
        T0,
        20,
    )
    assert keys.tolist() == [key_of(1, 0), key_of(1, 0), key_of(1, 1), key_of(2, 0)]
