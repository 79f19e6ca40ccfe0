"""Benchmark scripts, run as modules: python -m benchmarks.<name>."""
