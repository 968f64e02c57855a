"""Graph rewrites the delegate makes: folds of neighbours into a convolution, and the program-level rewrite.

Each pass is one module: `pad_fold` (a zero spatial pad into the convolution's padding), `batch_norm_fold` (an
inference batch norm into the convolution's weight and bias), `fold_batch_norms_in_program` (the same fold on
the ATen program, before ExecuTorch's decomposition). Nothing here imports executorch.
"""

from .batch_norm_fold import (
    BATCH_NORM_OVERLOADS,
    BatchNormFold,
    batch_norm_fold,
    batch_norm_follows,
    conv_constants,
    fold_batch_norm,
    is_batch_norm_node,
)
from .fold_batch_norms_in_program import FOLDED_BN_META, fold_batch_norms_in_program, folded_batch_norm_of
from .pad_fold import PAD_OVERLOADS, PadFold, is_pad_node, pad_fold, pad_users_ok, spatial_pad_amounts

__all__ = [
    "BATCH_NORM_OVERLOADS",
    "FOLDED_BN_META",
    "PAD_OVERLOADS",
    "BatchNormFold",
    "PadFold",
    "batch_norm_fold",
    "batch_norm_follows",
    "conv_constants",
    "fold_batch_norm",
    "fold_batch_norms_in_program",
    "folded_batch_norm_of",
    "is_batch_norm_node",
    "is_pad_node",
    "pad_fold",
    "pad_users_ok",
    "spatial_pad_amounts",
]
