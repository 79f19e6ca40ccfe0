"""`python -m specbench.models.eagle3 TARGET DEST`: build_in_subprocess's child."""

from specbench.models.eagle3.build import main

raise SystemExit(main())
