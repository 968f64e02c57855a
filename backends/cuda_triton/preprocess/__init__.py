"""The preprocess of `cuda_triton.backend.CudaTritonBackend`, one concern per module (see backend.py)."""
