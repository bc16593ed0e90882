"""The analysis of recorded runs: compact -> a task per system and step, run by Spark (join,
counts, digests) -> summaries and verdicts on the driver -> reports.

`analysis.job` only checks, plans, runs and writes. Raw events are never collected to the
driver: only per-step and per-second aggregates and digests are.
"""
