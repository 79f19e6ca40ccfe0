"""Before any launch: what a config will cost in GPU-hours and what it can decide (`specbench plan`).
"""
