"""spark-watchd: a monitoring daemon for NVIDIA DGX Spark (GB10)."""

__version__ = "0.1.0"
