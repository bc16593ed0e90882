"""What a user could write instead of `evbench analyze`: one DuckDB query over a run's record
files for the per-step figures (sent, send failures, delivered, duplicates, lost, exact
end-to-end P50/P99/P99.99, exact publish P99.99), the analysis benchmark's peer
(benchmarks/analysis_scale.py runs it on the same files, in a new process as evbench runs).

    .venv/bin/python benchmarks/duckdb_peer.py RUN_DIR     # prints JSON: seconds and figures

DuckDB is a benchmark-only dependency (`pip install -e '.[bench]'`, `make bench`). The rules
are docs/design.md §4's, as analysis.steprule applies them: ok = a 2xx; a send failure = not
ok; lost = ok, never received, not a decoy; duplicates = deliveries after the first; warm-up
slots not counted; latencies on the first delivery; publish latency of 2xx answers only;
quantiles interpolated linearly between the nearest ranks (`quantile_cont`), as evbench's exact
tails are.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contract.partnames import kept_names

_QUERY = """
WITH sent AS (
    SELECT regexp_extract(filename, '([^/]+)/sent/[^/]+$', 1) AS sut, *
    FROM read_parquet($sent, filename = true)
    WHERE NOT warmup
), firsts AS (
    SELECT regexp_extract(filename, '([^/]+)/received/[^/]+$', 1) AS sut, event_id,
           min(received_ns) AS received_ns, count(*) AS deliveries
    FROM read_parquet($received, filename = true)
    GROUP BY ALL
), joined AS (
    SELECT s.*, f.received_ns, coalesce(f.deliveries, 0) AS deliveries,
           s.status BETWEEN 200 AND 299 AS ok
    FROM sent s LEFT JOIN firsts f USING (sut, event_id)
)
SELECT sut, step,
       count(*) AS scheduled,
       count(*) FILTER (NOT ok) AS send_failures,
       count(received_ns) AS delivered,
       sum(greatest(deliveries - 1, 0))::BIGINT AS duplicates,
       count(*) FILTER (ok AND received_ns IS NULL AND NOT decoy) AS lost,
       quantile_cont((received_ns - intended_ns) / 1e6, [0.5, 0.99, 0.9999])
           FILTER (received_ns IS NOT NULL) AS e2e_ms,
       quantile_cont((ack_ns - sent_ns) / 1e6, 0.9999)
           FILTER (ok AND ack_ns IS NOT NULL) AS publish_p9999_ms
FROM joined GROUP BY sut, step ORDER BY sut, step
"""


def record_files(run_dir: Path, side: str) -> list[str]:
    """The files holding a side's records in every system of the run, as evbench reads them
    (contract.partnames.kept_names): a part a rolled file already holds is not read twice."""
    return [
        str(directory / name)
        for directory in sorted(run_dir.glob(f"*/{side}"))
        for name in kept_names(os.listdir(directory))
    ]


def step_figures(run_dir: Path) -> tuple[float, list[dict[str, object]]]:
    """The query's seconds (connect included) and one row per (sut, step)."""
    import duckdb

    started = time.perf_counter()
    connection = duckdb.connect()
    files = {side: record_files(run_dir, side) for side in ("sent", "received")}
    cursor = connection.execute(_QUERY, files)
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    return time.perf_counter() - started, rows


def main() -> int:
    seconds, rows = step_figures(Path(sys.argv[1]))
    print(json.dumps({"query_s": seconds, "steps": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
