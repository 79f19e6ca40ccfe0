"""`python -m specbench.plan.models.dflash TARGET DEST`: build_in_subprocess's child for smollm2-dflash."""

from specbench.plan.models.dflash.build import main

raise SystemExit(main())
