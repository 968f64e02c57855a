"""Helpers shared by the partitioner, the graph passes and the preprocess (no executorch imports)."""
