"""Op families beyond convolution: one package per family (elementwise, reduction, pooling, gemm, norm,
data_movement), each with its output-shape rule in ``layout.py``."""
