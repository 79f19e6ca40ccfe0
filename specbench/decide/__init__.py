"""decide: see docs/architecture.md."""
