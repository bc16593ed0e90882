"""The runtime the packages share: Parquet I/O and the record writers (`parquet`), child
processes (`procs`), the records server and client (`recordshare`), files and disk errors
(`files`), clock offsets (`clocks`), metric formulas (`formulas`) and argparse range types
(`argtypes`). It stands on the contract only (and the standard library and pyarrow);
`loadgen`, `receivers`, `suts` and `analysis` stand on both and never on each other.
"""
