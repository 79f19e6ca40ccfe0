"""pricing."""
