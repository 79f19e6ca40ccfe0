"""`python -m specbench.models.dflash TARGET DEST`: build_in_subprocess's child for smollm2-dflash."""

from .build import main

raise SystemExit(main())
