"""Does the clock correction undo a skewed receiver clock? Direct runs on loopback, the same
pace, the receiver's clock unshifted and shifted by +250 ms (`evbench run
--receiver-clock-shift`), each analysed with the correction on auto; prints end-to-end P50 and
P99 of each run, their differences, and the measured offsets with their bounds.

    .venv/bin/python benchmarks/clock_skew.py [--pace 1000:10] [--shift-ms 250] [--repeats 3]

Two runs never have identical latencies, so the figure to read is the difference next to the
run-to-run spread (the unshifted runs' own P50 and P99 across repeats).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import machine_line


def _run(runs: Path, run_id: str, pace: str, shift_ms: float) -> dict:
    subprocess.run(
        [
            sys.executable, "-m", "evbench", "run", "--sut", "direct", "--pace", pace,
            "--runs-dir", str(runs), "--run-id", run_id,
            "--receiver-clock-shift", str(shift_ms),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (sut_dir,) = (runs / d for d in runs.iterdir() if d.name.startswith(f"{run_id}-"))
    sut = sut_dir / "direct"
    summary = json.loads((sut / "analysis" / "summary.json").read_text())
    e2e = summary["latency_ms"]["e2e"]
    worker = summary["clock"]["workers"].get("0", {})
    return {
        "p50_ms": e2e["p50"],
        "p99_ms": e2e["p99"],
        "offset_ms": worker.get("offset_ns", 0) / 1e6,
        "bound_ms": worker.get("bound_ns", 0) / 1e6,
        "applied": summary["clock"]["applied"],
        "negative_e2e": summary["clock"]["negative_e2e"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pace", default="1000:10")
    parser.add_argument("--shift-ms", type=float, default=250.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(machine_line())
    print(f"pace {args.pace}, receiver clock shifted by {args.shift_ms:+g} ms, direct, loopback")
    print(
        f"{'repeat':>6} {'run':>9} {'p50 ms':>8} {'p99 ms':>8} {'offset ms':>10} "
        f"{'bound ms':>9} {'corrected':>9}"
    )
    diffs50, diffs99 = [], []
    with tempfile.TemporaryDirectory(prefix="evbench-skew-") as tmp:
        runs = Path(tmp)
        for repeat in range(1, args.repeats + 1):
            got = {}
            for name, shift in (("unshifted", 0.0), ("shifted", args.shift_ms)):
                got[name] = r = _run(runs, f"{name}{repeat}", args.pace, shift)
                print(
                    f"{repeat:>6} {name:>9} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
                    f"{r['offset_ms']:>+10.3f} {r['bound_ms']:>9.3f} {r['applied']!s:>9}"
                )
            diffs50.append(got["shifted"]["p50_ms"] - got["unshifted"]["p50_ms"])
            diffs99.append(got["shifted"]["p99_ms"] - got["unshifted"]["p99_ms"])
    print(
        f"shifted minus unshifted, median of {args.repeats}: "
        f"P50 {statistics.median(diffs50):+.3f} ms, P99 {statistics.median(diffs99):+.3f} ms "
        f"(each: P50 {', '.join(f'{d:+.3f}' for d in diffs50)}; "
        f"P99 {', '.join(f'{d:+.3f}' for d in diffs99)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
