"""Samza-style elasticity (virtual tasks over key buckets) for PySpark micro-batches."""

__version__ = "0.1.0"
