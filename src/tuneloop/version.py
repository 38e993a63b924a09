"""The version of tuneloop (read by setuptools without importing the package)."""

__version__ = "0.1.0"
