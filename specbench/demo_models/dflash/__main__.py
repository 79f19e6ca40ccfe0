"""`python -m specbench.demo_models.dflash TARGET DEST`: build_in_subprocess's child for smollm2-dflash."""

from specbench.demo_models.dflash.build import main

raise SystemExit(main())
