"""store backends."""
