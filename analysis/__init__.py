"""The Spark analysis of recorded runs: load -> join -> metrics -> digests -> verdicts -> reports.

Every transform is a `DataFrame -> DataFrame` function; `analysis.job` only reads, chains and
writes. Raw events are never collected to the driver: only per-second aggregates and digests are.
"""
