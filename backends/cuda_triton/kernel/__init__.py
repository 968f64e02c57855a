"""What every op family's kernels share: the launch protocol (`launch`) and the ahead-of-time compiler (`aot`).

Depends on torch and triton only (never on executorch), so it imports on the GPU machine.
"""
