"""The record checks both blob readers make (docs/blob_format.md, per kind): each module validates one record kind's
parameters and gives its output sizes, from the op family's shape rule (``cuda_triton/ops/<family>/shape.py``)
where the family has one.

Written in the small Python subset ``scripts/gen_layout_header.py`` translates, so the C++ reader runs the same
checks from ``runtime/generated/<module>_checks.h``. Torch-free.
"""
