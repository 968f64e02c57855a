"""The norm op family."""
