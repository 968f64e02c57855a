"""The delegate blob format: one writer (Python) and one reader (C++, runtime/)."""
