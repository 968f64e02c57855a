"""The elementwise op family."""
