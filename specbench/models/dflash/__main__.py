"""`python -m specbench.models.dflash TARGET DEST`: build_in_subprocess's child for smollm2-dflash."""

from specbench.models.dflash.build import main

raise SystemExit(main())
