"""The statistics that decide, as functions of numbers only (no file, no engine): t intervals and launch
variance, the four outcomes, the primary and secondary families, sequential stopping, where a curve crosses
1.0, and whether two nodes are the same hardware.
"""
