"""Test helpers shipped with crag, so plugins can test against the same fakes."""
