"""The version of crag, in a base module so any layer may read it."""

__version__ = "0.1.0"
