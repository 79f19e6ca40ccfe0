"""`python -m specbench.demo_models.eagle3 TARGET DEST`: build_in_subprocess's child."""

from specbench.demo_models.eagle3.build import main

raise SystemExit(main())
