"""correct backends."""
