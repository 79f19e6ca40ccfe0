"""Measurement scripts that write generated docs, each run as `python -m benchmarks.<name>` from the
repository root: fidelity (specbench vs vLLM's bench client on one server), client_overhead (how fast and
how exactly the client times chunks). Shared parts live in benchmarks.common."""
