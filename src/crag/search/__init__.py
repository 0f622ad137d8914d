"""search backends."""
