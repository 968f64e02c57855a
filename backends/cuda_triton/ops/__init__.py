"""Triton kernels of the op families beyond convolution (torch + triton only, never executorch)."""
