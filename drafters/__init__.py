"""Drafter families, one module each. A module exposes `DRAFTER`, an instance of specbench.plan.drafter.Drafter.

Adding a drafter = adding one file here; `specbench drafters` lists what is found.
"""
