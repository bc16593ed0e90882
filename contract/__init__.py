"""The contract: data definitions every process agrees on (and the few rules that claim and
name a run directory's files), nothing that runs a process, a server or a writer.

The record contract (`records`, `partnames`), the lines each child process prints (`lines` for
what several share, `senderlines`, `receiverlines`, `consumerlines`, `metricslines`), the JSON
documents (`documents`, `insight`, `memorydocs`: run.json, summary.json), the run-directory
layout (`layout`), units (`units`) and errors a user can act on (`errors`). Standard library and
pyarrow only, and nothing else of the project. What the packages share that does something
(Parquet I/O, processes, the records server, clocks, formulas, argument types) is `runtime`,
which stands on this; `tests/test_architecture.py` holds the arrows in place.
"""
