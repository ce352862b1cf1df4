"""recstack: a hierarchical, cross-stack profiler and benchmark suite for recommendation models."""

__version__ = "0.1.0"
