"""Layer tables from the papers (data in layer_tables.json), shared by the zoo's modules (`cuda_triton.models.zoo`)
and the tuning layers (`cuda_triton.tools.tuning_networks`), so both build the same network."""

from __future__ import annotations

from ..kernel.spaces import load_rows

# MobileNetV2's inverted-residual stages, (expansion t, channels c, repeats n, stride s), from the paper's Table 2.
MOBILENETV2_STAGES = load_rows(__file__, "MOBILENETV2_STAGES", ("t", "c", "n", "s"), "layer_tables.json")
# EfficientNet-B0's MBConv stages, (expansion e, kernel k, stride s, channels c, repeats n), from the paper's
# Table 1.
EFFICIENTNET_B0_STAGES = load_rows(
    __file__, "EFFICIENTNET_B0_STAGES", ("e", "k", "s", "c", "n"), "layer_tables.json"
)
