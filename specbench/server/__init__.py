"""The engines and their processes: one module per engine kind under `engines/`, the process group that is
always stopped, ports, the launch argv of a variant, multi-node and Slurm steps, and the engines' flag tables.
"""
