"""shared: see docs/architecture.md."""
