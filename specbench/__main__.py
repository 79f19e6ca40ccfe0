"""`python -m specbench ...`: the `specbench` command."""

import sys

from specbench.cli import main

sys.exit(main())
