"""plan: see docs/architecture.md."""
