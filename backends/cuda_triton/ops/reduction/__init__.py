"""The reduction op family."""
