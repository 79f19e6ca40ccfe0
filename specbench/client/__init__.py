"""client: see docs/architecture.md."""
