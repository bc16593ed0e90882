"""What every benchmark prints first: the machine its figures come from."""

import os
import platform


def machine_line() -> str:
    return (
        f"machine: {os.cpu_count()} cores, {platform.machine()}, "
        f"python {platform.python_version()}, {platform.platform()}"
    )
