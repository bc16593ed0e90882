"""`python -m receivers`: one receiver until SIGINT/SIGTERM (`evbench receive` runs the same)."""

from runtime.allocator import prefer_system_allocator

if __name__ == "__main__":
    prefer_system_allocator()  # first of all (it may start the process again): allocator.py

from receivers.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
