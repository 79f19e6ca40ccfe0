"""What is kept across runs, per machine and setup: the variance history and its setup keys, which entries a
run pools and whether they fit it, calibration runs, and the prediction ledger.
"""
