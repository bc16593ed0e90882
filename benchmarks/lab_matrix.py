"""The lab matrix of one analysed run, one line per system: verdict, tail latency, losses.

    .venv/bin/python benchmarks/lab_matrix.py runs/run-1-1k-2k

Per SUT: the verdict (breaking point or held), P99.99 end-to-end at the first step and over the
run, sent / send failures / lost, which steps were sender-limited (inconclusive, not a break),
how long the SUT took to be ready (Kafka: partition assignment), and the peak RSS of its
processes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.capacity import verdict_text

_INSTRUMENTS = ("sender", "receiver")


def line(sut_dir: Path) -> str:
    summary = json.loads((sut_dir / "analysis" / "summary.json").read_text())
    run = json.loads((sut_dir / "run.json").read_text())
    steps = summary["steps"]
    first = steps[0] if steps else {}
    limited = [
        f"{s['step']} ({s['target_rate_per_s']}/s)"
        for s in steps
        if s["verdict"] == "sender-limited"
    ]
    counts = summary["counts"]
    ready = (run.get("sut_settings") or {}).get("readiness", {}).get("waited_s")
    peaks = {
        role: round(rss / 1e6)
        for role, rss in (run.get("peak_rss_bytes") or {}).items()
        if role not in _INSTRUMENTS
    }
    e2e = summary["latency_ms"]["e2e"]
    bp, failures = summary["breaking_point_per_s"], summary.get("instrument_failures", ())
    return (
        f"{summary['sut']:<14} "
        f"{verdict_text(bp, summary['max_sustainable_rate_per_s'], failures)}\n"
        f"{'':<15}P99.99 e2e at step 1: {first.get('p9999_e2e_ms')} ms; "
        f"whole run: {e2e['p9999']} ms (n={e2e['n']})\n"
        f"{'':<15}sent {counts['sent']}, send failures {counts['send_failures']}, "
        f"lost {counts['lost']}, duplicates {counts['duplicates']}\n"
        f"{'':<15}sender-limited steps: {', '.join(limited) or 'none'}; "
        f"ready after {ready if ready is not None else '-'} s; peak RSS MB {peaks or '-'}\n"
        f"{'':<15}breaking steps: "
        + (
            "; ".join(
                f"{s['step']} ({s['target_rate_per_s']}/s): {', '.join(s['reasons'])}"
                for s in steps
                if s["verdict"] == "breaks"
            )
            or "none"
        )
    )


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    run_dir = Path(sys.argv[1])
    suts = sorted(p.parent.parent for p in run_dir.glob("*/analysis/summary.json"))
    if not suts:
        print(f"no analysed SUTs under {run_dir}; run `evbench analyze {run_dir}` first")
        return 1
    for sut_dir in suts:
        print(line(sut_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
