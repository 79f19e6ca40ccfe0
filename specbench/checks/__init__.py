"""checks: see docs/architecture.md."""
