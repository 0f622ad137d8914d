"""evaluate backends."""
