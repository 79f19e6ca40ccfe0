"""What every stage shares: errors, the registry of engine kinds, the record schemas (`schema.py`), the run
environment, progress lines, and the CPU dtype choice.
"""
