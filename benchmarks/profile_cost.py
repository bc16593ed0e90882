"""What profiling a step costs the step: the same lab system and pace run without and with
`--profile STEP:SECONDS`, alternating, each analysed; the profiled step's figures side by side
with their medians, and what py-spy itself used.

    .venv/bin/python benchmarks/profile_cost.py --sut channel-kafka --pace 1000:15,1000:15,1000:15 \
        --profile 2:10 --repeats 3

py-spy samples each lab process from outside at 100 Hz without pausing it (`--nonblocking`), on
the same cores as the lab and the instruments: on a 2-core machine that is the cost to watch.
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

_FIGURES = (
    "achieved_send_rate_per_s",
    "delivered_rate_per_s",
    "sender_lag_p99_ms",
    "p99_e2e_ms",
    "p9999_e2e_ms",
    "send_failures",
    "lost",
)


def _run(runs: Path, run_id: str, args: argparse.Namespace, profiled: bool) -> Path:
    argv = [
        sys.executable, "-m", "evbench", "run", "--sut", args.sut, "--pace", args.pace,
        "--run-id", run_id, "--runs-dir", str(runs),
        *(["--profile", args.profile] if profiled else []),
    ]  # fmt: skip
    subprocess.run(argv, check=True, capture_output=True, text=True)
    (root,) = runs.glob(f"{run_id}-*/{args.sut}")
    return root


def _step(root: Path, number: int) -> dict[str, float]:
    summary = json.loads((root / "analysis" / "summary.json").read_text())
    (step,) = [s for s in summary["steps"] if s["step"] == number]
    return {name: step[name] for name in _FIGURES}


def _spy_cost(root: Path) -> str:
    run = json.loads((root / "run.json").read_text())
    spies = [p for p in run.get("profiles", []) if p["kind"] == "py-spy"]
    return ", ".join(
        f"{p['target']} {p.get('samples', 0)} samples, py-spy CPU {p.get('profiler_cpu_s', 0)} s, "
        f"wall {p['wall_s']} s{' (' + p['error'] + ')' if p['error'] else ''}"
        for p in spies
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sut", default="channel-kafka", help="a lab system (default channel-kafka)"
    )
    parser.add_argument("--pace", default="1000:15,1000:15,1000:15", help="the pace of every run")
    parser.add_argument("--profile", default="2:10", help="the step profiled, STEP:SECONDS")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each kind (default 3)")
    args = parser.parse_args()
    step = int(args.profile.split(":")[0])
    print(machine_line())
    print(f"{args.sut}, pace {args.pace}, step {step} with and without --profile {args.profile}")
    figures: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as scratch:
        for repeat in range(args.repeats):
            for profiled in (False, True):
                root = _run(Path(scratch), f"r{repeat}-{int(profiled)}", args, profiled)
                figures[profiled].append(_step(root, step))
                kind = "profiled" if profiled else "plain   "
                print(f"  {kind} {figures[profiled][-1]}")
                if profiled:
                    print(f"           {_spy_cost(root)}")
    print("medians (plain -> profiled):")
    for name in _FIGURES:
        plain = statistics.median(f[name] or 0 for f in figures[False])
        profiled = statistics.median(f[name] or 0 for f in figures[True])
        print(f"  {name:<26} {plain:>10.3f} -> {profiled:>10.3f}")


if __name__ == "__main__":
    main()
