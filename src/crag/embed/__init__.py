"""embed backends."""
