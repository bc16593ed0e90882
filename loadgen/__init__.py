"""Load generation: the pace model and schedule (pure), and the open-loop sender.

Importing this package is free of side effects; `python -m loadgen` (loadgen.__main__) runs one
sender process on uvloop.
"""
