"""The shared floor: what the sender, the receiver, the lab and the analysis all stand on.

The record contract (`records`), the JSON documents (`documents`: run.json, summary.json,
progress lines), the run-directory layout (`layout`), errors a user can act on
(`errors`), Parquet I/O (`parquet`), metric formulas (`formulas`), child-process helpers
(`procs`) and argparse range types (`argtypes`). Standard library and pyarrow only, and nothing
else of the project: `loadgen`, `receivers`, `suts` and `analysis` import from here and never
from each other, and the orchestration above them (`evbench.cli`, `evbench.runner`, ...) may
import everything. `tests/test_architecture.py` holds these arrows in place.
"""
