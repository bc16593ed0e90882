"""`python -m receivers`: one receiver until SIGINT/SIGTERM (`evbench receive` runs the same)."""

from runtime.allocator import prefer_system_allocator

if __name__ == "__main__":
    prefer_system_allocator()  # before anything imports pyarrow: runtime/allocator.py says why

from receivers.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
