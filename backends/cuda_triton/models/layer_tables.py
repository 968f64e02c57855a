"""Layer tables from the papers, shared by the zoo's modules (`cuda_triton.models.zoo`) and the tuning layers
(`cuda_triton.tools.tuning_networks`), so both build the same network."""

from __future__ import annotations

# MobileNetV2's inverted-residual stages, (expansion t, channels c, repeats n, stride s), from the paper's Table 2.
MOBILENETV2_STAGES: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
