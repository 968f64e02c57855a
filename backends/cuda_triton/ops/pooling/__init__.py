"""The pooling op family."""
