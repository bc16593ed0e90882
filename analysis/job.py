"""`evbench analyze`: a SUT directory's records -> analysis/{metrics.parquet, steps.csv,
digests.parquet, cumulative.parquet, summary.json}.

Reads, chains the transforms, writes. Only aggregates reach the driver: per-second counts,
per-step totals, per-step (compressed) digests and the cumulative line's points.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from analysis.digests import (
    cumulative_lines,
    from_json,
    merged,
    per_second_digests,
    per_step_digests,
    prefix_digests,
    tail_figures,
)
from analysis.load import load_records
from analysis.transforms import (
    first_deliveries,
    foreign,
    join_deliveries,
    latency_values,
    measured,
    per_second,
    step_totals,
    trimmed,
    with_latencies,
    with_outcomes,
)
from analysis.verdicts import StepFigures, Thresholds, breaking_point, judge, slope_rise_ms
from evbench.errors import EvbenchError
from evbench.formulas import achieved_rate_per_s
from evbench.records import RECEIVED_FIELDS, SENT_FIELDS

SUMMARY_LATENCIES = {
    "publish": "publish",
    "publish_corrected": "publish_corrected",
    "e2e": "e2e",
    "e2e_uncorrected": "e2e_uncorrected",
}


@dataclass(frozen=True)
class AnalyzeOptions:
    trim_s: float = 0.0
    thresholds: Thresholds = field(default_factory=Thresholds)


def sut_dirs(path: Path) -> list[Path]:
    """A SUT directory itself, or every SUT directory of a run directory."""
    if (path / "run.json").is_file():
        return [path]
    found = sorted(p.parent for p in path.glob("*/run.json"))
    if not found:
        raise EvbenchError(
            f"{path}: neither a SUT directory (run.json) nor a run with SUT directories"
        )
    return found


def read_run_json(sut_dir: Path) -> dict:
    path = sut_dir / "run.json"
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise EvbenchError(f"{path}: cannot read run.json ({exc})") from exc
    if not (run.get("schedule") or {}).get("start_ns"):
        raise EvbenchError(
            f"{path}: no schedule start: the sender never started, nothing to analyse"
        )
    return run


def analyze_sut(
    spark: SparkSession,
    sut_dir: Path,
    opts: AnalyzeOptions,
    echo: Callable[[str], None] = lambda line: None,
) -> dict:
    run = read_run_json(sut_dir)
    start_ns = int(run["schedule"]["start_ns"])
    sent = load_records(spark, sut_dir / "sent", SENT_FIELDS)
    received = load_records(spark, sut_dir / "received", RECEIVED_FIELDS)
    out = sut_dir / "analysis"
    out.mkdir(exist_ok=True)

    events = with_latencies(
        with_outcomes(
            join_deliveries(
                trimmed(measured(sent), start_ns, opts.trim_s), first_deliveries(received)
            )
        )
    ).cache()
    per_second(events, start_ns).orderBy("second").coalesce(1).write.mode("overwrite").parquet(
        str(out / "metrics.parquet")
    )
    totals = [r.asDict() for r in step_totals(events).collect()]
    seconds_digests = per_second_digests(latency_values(events, start_ns)).cache()
    seconds_digests.orderBy("metric", "second").coalesce(1).write.mode("overwrite").parquet(
        str(out / "digests.parquet")
    )
    step_digests = {
        (r["metric"], r["step"]): from_json(r["digest"])
        for r in per_step_digests(seconds_digests).collect()
    }
    step_order = [t["step"] for t in totals]
    prefixes = spark.createDataFrame(
        prefix_digests(step_digests, step_order), "metric string, step int, prefix string"
    )
    cumulative_lines(seconds_digests, prefixes).orderBy("metric", "second").coalesce(1).write.mode(
        "overwrite"
    ).parquet(str(out / "cumulative.parquet"))
    e2e_seconds = _per_second_quantiles(seconds_digests, "e2e")
    foreign_count = foreign(received, sent).count()
    events.unpersist()
    seconds_digests.unpersist()

    durations = {i: s["duration_s"] for i, s in enumerate(run["pace"]["steps"], start=1)}
    steps = [_step_row(t, durations, step_digests, e2e_seconds, opts.thresholds) for t in totals]
    point, sustainable = breaking_point([s.pop("_verdict") for s in steps])
    summary = {
        "run_id": run["run_id"],
        "sut": run["sut"],
        "pace": run["pace"]["name"],
        "status": run.get("status"),
        "trim_s": opts.trim_s,
        "trimmed": (
            f"events intended in the first {opts.trim_s:g} s after the schedule start are left out"
            if opts.trim_s
            else None
        ),
        "counts": _counts(totals, foreign_count),
        "latency_ms": {
            name: tail_figures(merged(d for (m, _), d in step_digests.items() if m == metric))
            for name, metric in SUMMARY_LATENCIES.items()
        },
        "steps": steps,
        "breaking_point_per_s": point,
        "max_sustainable_rate_per_s": sustainable,
        "thresholds": opts.thresholds.as_dict(),
    }
    _write_steps_csv(out / "steps.csv", steps)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    echo(_headline(summary))
    return summary


def _per_second_quantiles(seconds_digests: DataFrame, metric: str) -> dict[int, list[tuple]]:
    """step -> [(second, p50_ms)] for one metric: small, for the latency slope."""
    rows = (
        seconds_digests.where(seconds_digests.metric == metric)
        .select("step", "second", "p50_ms")
        .collect()
    )
    by_step: dict[int, list[tuple]] = {}
    for row in rows:
        by_step.setdefault(row["step"], []).append((row["second"], row["p50_ms"]))
    return {step: sorted(points) for step, points in by_step.items()}


def _step_row(
    total: dict,
    durations: dict[int, int],
    step_digests: dict,
    e2e_seconds: dict,
    thresholds: Thresholds,
) -> dict:
    step, rate = total["step"], total["target_rate_per_s"]
    duration_s = durations.get(step, max(1, total["scheduled"] // max(rate, 1)))
    last_handled_ns = max(total["last_sent_ns"] or 0, total["last_intended_ns"] or 0)
    handled = total["sent"] + total["cap_refused"]
    sender_rate = achieved_rate_per_s(handled, total["start_ns"], last_handled_ns, rate)
    achieved = achieved_rate_per_s(total["sent"], total["start_ns"], total["last_sent_ns"], rate)
    e2e = tail_figures(step_digests.get(("e2e", step)) or merged([]))
    lag = tail_figures(step_digests.get(("sender_lag", step)) or merged([]))
    points = e2e_seconds.get(step, [])
    figures = StepFigures(
        step=step,
        target_rate_per_s=rate,
        scheduled=total["scheduled"],
        acked=total["acked"],
        send_failures=total["send_failures"],
        lost=total["lost"],
        sender_ratio=sender_rate / rate if rate else 0.0,
        sender_lag_p99_ms=lag["p99"],
        delivered_rate_per_s=total["delivered"] / duration_s,
        e2e_median_ms=e2e["p50"],
        e2e_rise_ms=slope_rise_ms([p[0] for p in points], [p[1] for p in points]),
    )
    verdict = judge(figures, thresholds)
    return {
        "step": step,
        "target_rate_per_s": rate,
        "duration_s": duration_s,
        "scheduled": total["scheduled"],
        "achieved_send_rate_per_s": round(achieved, 2),
        "delivered_rate_per_s": round(figures.delivered_rate_per_s, 2),
        "send_failures": total["send_failures"],
        "inflight_cap_refused": total["cap_refused"],
        "lost": total["lost"],
        "duplicates": total["duplicates"],
        "sender_lag_p99_ms": lag["p99"],
        "p99_e2e_ms": e2e["p99"],
        "p9999_e2e_ms": e2e["p9999"],
        "e2e_n": e2e["n"],
        "p9999_is_max": e2e["p9999_is_max"],
        "e2e_rise_ms": None if figures.e2e_rise_ms is None else round(figures.e2e_rise_ms, 3),
        "verdict": verdict.verdict,
        "reasons": list(verdict.reasons),
        "_verdict": verdict,
    }


def _counts(totals: list[dict], foreign_count: int) -> dict:
    def total(key: str) -> int:
        return int(sum(t[key] or 0 for t in totals))

    return {
        "sent": total("sent"),
        "scheduled": total("scheduled"),
        "send_failures": total("send_failures"),
        "acked": total("acked"),
        "received": total("delivered"),
        "lost": total("lost"),
        "duplicates": total("duplicates"),
        "foreign": foreign_count,
    }


def _write_steps_csv(path: Path, steps: list[dict]) -> None:
    columns = [k for k in steps[0] if k != "reasons"] + ["reasons"] if steps else []
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for step in steps:
            writer.writerow({**step, "reasons": "; ".join(step["reasons"])})


def _headline(summary: dict) -> str:
    e2e = summary["latency_ms"]["e2e"]
    point = summary["breaking_point_per_s"]
    verdict = (
        f"breaks at {point}/s, max sustainable {summary['max_sustainable_rate_per_s']}/s"
        if point
        else f"held every judged step (max sustainable {summary['max_sustainable_rate_per_s']}/s)"
    )
    tail = "max" if e2e["p9999_is_max"] else "P99.99"
    c = summary["counts"]
    return (
        f"{summary['sut']}: {verdict}; e2e {tail} {e2e['p9999']} ms (n={e2e['n']}); "
        f"sent {c['sent']}, send failures {c['send_failures']}, lost {c['lost']}, "
        f"duplicates {c['duplicates']}, foreign {c['foreign']}"
    )
