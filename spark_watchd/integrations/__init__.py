"""Framework callbacks that report training progress; each imports without its framework installed."""
