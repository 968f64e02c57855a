"""An in-tree model zoo (random weights, no downloads) for export tests and GPU validation."""
