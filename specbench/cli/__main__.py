"""`python -m specbench.cli ...`: the `specbench` command (the cluster workers are started so)."""

import sys

from specbench.cli import main

sys.exit(main())
