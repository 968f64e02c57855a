"""Elementwise chains drafted into the blob (real Triton AOT compiles, no emulation).

Checks, with the elementwise config passed to the partitioner explicitly: a convolution followed by an
elementwise chain exports as one delegate; single-user elementwise ops fuse into one `ElementwiseRecord`
whose launches name compiled kernels; the blob reads back equal to what the preprocess wrote.
"""

from __future__ import annotations

import pytest
import torch
from cuda_triton import CudaTritonPartitioner
from cuda_triton.partition.config import configs_for
from cuda_triton.preprocess import assemble as assemble_mod
from cuda_triton.serialization import ConvRecord, ElementwiseRecord
from cuda_triton.serialization import blob as blob_mod
from executorch.exir import to_edge_transform_and_lower
from torch import nn

pytestmark = pytest.mark.usefixtures("fresh_triton_cache")


class ConvThenChain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x, y):
        z = self.conv(x)
        return torch.sigmoid(torch.relu(z) * 0.5 + y)


def test_a_chain_after_a_convolution_is_one_elementwise_record(monkeypatch):
    written: list[tuple[blob_mod.DelegateBlob, bytes]] = []
    real = blob_mod.serialize

    def spy(b):
        data = real(b)
        written.append((b, data))
        return data

    monkeypatch.setattr(assemble_mod, "serialize", spy)
    xs = (torch.randn(1, 4, 6, 6), torch.randn(1, 8, 6, 6))
    ep = torch.export.export(ConvThenChain().eval(), xs)
    partitioner = CudaTritonPartitioner(configs=configs_for(["conv", "elementwise"]))
    to_edge_transform_and_lower(ep, partitioner=[partitioner])

    assert len(written) == 1, "expected one delegate"
    blob, data = written[0]
    kinds = [type(op) for op in blob.ops]
    assert kinds.count(ConvRecord) == 1
    assert kinds.count(ElementwiseRecord) == 1, f"the chain should fuse into one record: {kinds}"
    back = blob_mod.deserialize(data)
    assert back.ops == blob.ops and back.values == blob.values
    assert blob_mod.serialize(back) == data
    chain = blob.ops[kinds.index(ElementwiseRecord)]
    assert chain.launches
    for launch in chain.launches:
        assert set(launch.kernels) == set(blob.archs)
        assert all(blob.kernels[k].arch == arch for arch, k in launch.kernels.items())
