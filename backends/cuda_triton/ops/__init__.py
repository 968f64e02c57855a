"""Kernel families beyond convolution: each family (elementwise, reduction, norm, ...) in its own package.

Every family has the same parts, one concern per module: an op spec built from static metadata only, with
``supports(spec)``; the output shape/stride rule (pure Python, torch-free, so the C++ runtime can mirror it);
the ``@triton.jit`` kernels and their schedule heuristics; ``launches(spec, schedule)`` giving the
`KernelLaunch` list the AOT compiler and the C++ runtime replay; and a CPU reference in ATen.

Like ``cuda_triton.conv``, this package depends on torch and triton only, never on executorch.
"""
