"""The gemm op family."""
