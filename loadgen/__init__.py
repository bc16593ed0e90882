"""Load generation: the pace model and schedule (pure), and the open-loop sender.

Importing this package is free of side effects; only `python -m loadgen` (loadgen.__main__)
monkey-patches the process for gevent.
"""
