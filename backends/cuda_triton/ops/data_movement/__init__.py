"""The data movement op family."""
