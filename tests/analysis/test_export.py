"""`--export-knative` cumulative lines: one point per event, as 2019's processor wrote them."""

import bisect
import json

import numpy as np
import pyarrow as pa
import pytest

from analysis.export import CUMULATIVE_FILES, running_batches, running_quantiles
from analysis.job import AnalyzeOptions, analyze
from contract.records import RECEIVED_FIELDS, SENT_FIELDS, ReceivedRow
from runtime.parquet import PartWriter
from tests.analysis.crafted import MS, T0, S, sent_row

STEPS = [(200, 10), (400, 10)]  # (rate, seconds); 2 s gap between them
QUANTILES = {"p99": 0.99, "p99-9": 0.999, "p99-99": 0.9999}
# (step, start s into it, length s, low ms, high ms): bursts of latency, as a GC pause or a
# rebalance makes them; the cumulative lines jump within a second and decay after.
SPIKES = {
    "publish": [(1, 2.0, 0.1, 40, 48), (2, 5.0, 0.05, 120, 130)],
    "delivery": [(1, 0.5, 0.05, 60, 66), (1, 7.0, 0.2, 200, 230), (2, 3.0, 0.1, 90, 100)],
}


def _latency_ms(metric, index, step, t_s, scale):
    """Dense, deterministic body values (base .. 1.5 x base), or a spike's."""
    base = {"publish": 1.0, "delivery": 5.0}[metric]
    value = base + (index * 37 % 100) / 100 * base / 2
    for spike_step, start_s, length_s, low_ms, high_ms in SPIKES[metric]:
        if spike_step == step and start_s <= t_s < start_s + length_s:
            value = low_ms + (index * 53 % 97) / 97 * (high_ms - low_ms)
    return value * scale


def craft_spiky(root, sut_name, scale):
    """A SUT directory with spiky latencies; returns each line's samples (sent_ns, seq, ms).

    Every 97th event fails (no publish latency), every 89th accepted one is lost (no delivery
    latency); in step 2 events go out in pairs with the same send time, as two workers would."""
    sut = root / "run-s-p" / sut_name
    sent_w = PartWriter(sut / "sent", SENT_FIELDS)
    recv_w = PartWriter(sut / "received", RECEIVED_FIELDS)
    samples = {"publish": [], "delivery": []}
    seq, offset_ns = 0, 0
    for step, (rate, seconds) in enumerate(STEPS, start=1):
        for i in range(rate * seconds):
            slot = i - i % 2 if step == 2 else i
            intended = T0 + offset_ns + slot * S // rate
            sent_ns = intended + 100_000
            publish = round(_latency_ms("publish", seq, step, i / rate, scale) * MS)
            delivery = round(_latency_ms("delivery", seq, step, i / rate, scale) * MS)
            if seq % 97 == 5:
                sent_w.append(
                    sent_row(f"e-{seq}", seq, step, rate, intended, sent_ns, sent_ns + MS, 503, "x")
                )
            else:
                ack = sent_ns + publish
                sent_w.append(
                    sent_row(f"e-{seq}", seq, step, rate, intended, sent_ns, ack, 202, None)
                )
                samples["publish"].append((sent_ns, seq, publish / MS))
                if seq % 89 != 3:
                    recv_w.append(
                        ReceivedRow(f"e-{seq}", sent_ns + delivery, "rx", 8192, None, "t", "s")
                    )
                    samples["delivery"].append((sent_ns, seq, delivery / MS))
            seq += 1
        offset_ns += (seconds + 2) * S
    sent_w.flush()
    recv_w.flush()
    run = {
        "run_id": "run-s",
        "sut": sut_name,
        "status": "completed",
        "pace": {"name": "p", "steps": [{"rate_per_s": r, "duration_s": d} for r, d in STEPS]},
        "schedule": {"start_ns": T0},
    }
    (sut / "run.json").write_text(json.dumps(run))
    return sut, samples


def exact_running_quantiles(samples, q):
    """After each sample in send order (ties by sequence number): numpy's linear quantile of
    every sample so far. Where a T-Digest's centroids around the quantile are single values,
    as they are at these counts, its estimate is this value."""
    ordered, line = [], []
    for sent_ns, _, value in sorted(samples):
        bisect.insort(ordered, value)
        rank = q * (len(ordered) - 1)
        low = int(rank)
        high = min(low + 1, len(ordered) - 1)
        y = ordered[low] + (rank - low) * (ordered[high] - ordered[low])
        line.append((sent_ns / 1e6, y))
    return line


@pytest.fixture(scope="module")
def exported(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    crafted = dict(
        craft_spiky(root, name, scale) for name, scale in (("direct", 1.0), ("broker-imc", 2.5))
    )
    analyze(spark, list(crafted), AnalyzeOptions(export_knative=True))
    return crafted


def _rows(path):
    return [tuple(float(v) for v in line.split(",")) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("metric", ["publish", "delivery"])
@pytest.mark.parametrize("prefix", list(QUANTILES))
def test_cumulative_line_has_a_point_per_event_matching_a_running_reference(
    exported, metric, prefix
):
    for sut, samples in exported.items():
        line = _rows(sut / "analysis" / "knative" / f"{prefix}-{metric}-latency.csv")
        reference = exact_running_quantiles(samples[metric], QUANTILES[prefix])
        assert len(line) == len(reference) == len(samples[metric]), sut.name  # not per second
        pairs = list(zip(line, reference, strict=True))
        worst = max(abs(y - want) / want for (_, y), (_, want) in pairs)
        assert worst <= 0.01, (sut.name, worst)
        assert all(abs(x - want_x) < 1e-3 for (x, _), (want_x, _) in pairs)  # send times, ms


def test_the_spikes_move_the_line_within_a_second(exported):
    """What a per-second line missed: within the step-1 second of the 200-230 ms spike, the
    per-event delivery P99.99 climbs from the body to the spike at the events that cause it."""
    sut = next(iter(exported))
    line = _rows(sut / "analysis" / "knative" / "p99-99-delivery-latency.csv")
    spike_start_ms = (T0 + 7 * S + 100_000) / 1e6
    before = [y for x, y in line if x < spike_start_ms]
    during = [y for x, y in line if spike_start_ms <= x < spike_start_ms + 1000]
    assert max(before) < 70 and max(during) > 200 and len(set(during)) > 20


@pytest.mark.parametrize("batch_rows", [1, 7, 1000, 5000])
def test_a_line_streamed_in_batches_equals_the_line_fed_whole(batch_rows):
    """The cumulative lines come from a partition's sorted samples in batches: a line that
    spans batches goes on from its digest and count, and a new line starts afresh."""
    rng = np.random.default_rng(3)
    keys = [("a", "delivery")] * 1500 + [("a", "publish")] * 700 + [("b", "delivery")] * 800
    values = rng.gamma(2.0, 3.0, len(keys))
    table = pa.table(
        {
            "sut": [k[0] for k in keys],
            "metric": [k[1] for k in keys],
            "sent_ns": np.arange(len(keys), dtype=np.int64),
            "seq": np.arange(len(keys), dtype=np.int64),
            "value_ms": values,
        }
    )
    out = pa.Table.from_batches(list(running_batches(iter(table.to_batches(batch_rows)))))
    assert out.column("sent_ns").to_pylist() == table.column("sent_ns").to_pylist()
    for first, count in ((0, 1500), (1500, 700), (2200, 800)):
        whole = running_quantiles(values[first : first + count])
        got = out.slice(first, count)
        assert got.column("n").to_pylist() == list(range(1, count + 1))
        for i, (column, _) in enumerate(CUMULATIVE_FILES.values()):
            assert np.array_equal(got.column(column).to_numpy(), whole[:, i])
