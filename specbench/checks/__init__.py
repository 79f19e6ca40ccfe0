"""What is checked before anything starts: the fairness audit (every variant pinned equal) and the
preflight of the node (engines installed, paths, GPUs and memory, ports).
"""
