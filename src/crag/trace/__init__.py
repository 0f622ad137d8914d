"""trace backends."""
