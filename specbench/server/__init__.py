"""server: see docs/architecture.md."""
