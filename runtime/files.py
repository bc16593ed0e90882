"""Small documents written whole or not at all (run.json, summaries, pages, plotly.js).

A full disk must leave the old copy or the new one, never half of one and never a temporary
file beside it: the temporary is removed when the write fails, and the error names the path
(`disk_error`), for a one-line message instead of a traceback.
"""

from __future__ import annotations

import errno
from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """`path` holds `text` afterwards, or (an OSError raised) what it held before."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        # A write that fails on an open file names none: name the document for the message.
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def disk_error(exc: OSError, what: str) -> str:
    """One line for an OSError while writing `what`: the path, what happened, what to check."""
    where = exc.filename or what
    if exc.errno == errno.ENOSPC:
        return f"no space left on the device writing {where}: free some space and run again"
    if exc.errno == errno.EDQUOT:
        return f"disk quota exceeded writing {where}"
    return f"could not write {where}: {exc.strerror or exc}"
