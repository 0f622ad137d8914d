"""ingest backends."""
