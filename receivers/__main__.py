"""`python -m receivers`: run one receiver until SIGINT/SIGTERM (`evbench receive` is the same)."""

from receivers.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
