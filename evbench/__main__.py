import sys

from evbench.cli import main

sys.exit(main())
