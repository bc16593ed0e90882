"""A fleet of open-loop senders coordinated by Locust's master/worker runtime.

Nothing here may be imported by a process that runs the pacer, the receiver or Spark: the
entry point (`python -m loadgen.fleet`) imports Locust, which monkey-patches the process for
gevent. The pacer itself always runs as a child process (`python -m loadgen`), unpatched.
"""
