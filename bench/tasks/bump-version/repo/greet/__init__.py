"""Says hello."""

__version__ = "1.4.2"
