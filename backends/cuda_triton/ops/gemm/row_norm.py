"""The constant a row-normalising GEMM reads besides its operands (`GemmSpec.row_norm_eps`, kernels.py).

The kernel computes ``a @ w`` on the rows of ``a`` as stored and turns it into ``((a - mean) * rstd) @ w`` in its
epilogue, which needs the sum of each column of ``w``: a constant made once at export from the weight the kernel
multiplies, and bound to the launch's ``colsum`` role.
"""

from __future__ import annotations

import torch

COLSUM_ROLE = "colsum"


def column_sums(w_kn: torch.Tensor) -> torch.Tensor:
    """The fp32 sums over K of ``w_kn`` ([K, N], the values as the kernel reads them), summed in fp64."""
    if w_kn.dim() != 2:
        raise ValueError(f"column sums of a [K, N] matrix, not sizes {list(w_kn.shape)}")
    return w_kn.double().sum(dim=0).float()


__all__ = ["COLSUM_ROLE", "column_sums"]
