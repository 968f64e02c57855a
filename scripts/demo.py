"""Demo: export a small model, bind every convolution and print its canonical call and output layout."""

from __future__ import annotations

import torch
from torch import nn

from cuda_triton.conv import bind_conv, out_shape_and_stride
from cuda_triton.conv.binding import is_conv_node


class DemoNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(16, 16, 5, padding="same", groups=16)
        self.dilated = nn.Conv2d(16, 16, 3, padding=2, dilation=2)
        self.up = nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1)
        self.head = nn.Conv1d(8, 4, 2, padding="same")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.up(self.dilated(self.dw(self.stem(x))))
        return self.head(y.flatten(2))


def main() -> None:
    model = DemoNet().eval()
    example = (torch.randn(1, 3, 32, 32).to(memory_format=torch.channels_last),)
    ep = torch.export.export(model, example)
    for node in ep.graph.nodes:
        if not is_conv_node(node):
            continue
        a = bind_conv(node)
        x, w = a.input.meta["val"], a.weight.meta["val"]
        sizes, strides = out_shape_and_stride(
            list(x.shape), list(x.stride()), list(w.shape), list(w.stride()), *[list(v) for v in (
                a.stride, a.padding_before, a.padding_after, a.dilation)],
            a.transposed, list(a.output_padding), a.groups, x.dtype == torch.float64,
        )
        print(f"{node.name:<14} {node.target}")
        print(
            f"  triton.convolution(input{list(x.shape)}, weight{list(w.shape)}, bias={a.bias is not None}, "
            f"stride={list(a.stride)}, padding_before={list(a.padding_before)}, "
            f"padding_after={list(a.padding_after)}, dilation={list(a.dilation)}, transposed={a.transposed}, "
            f"output_padding={list(a.output_padding)}, groups={a.groups})"
        )
        print(f"  -> output sizes {sizes}, CUDA strides {strides}")


if __name__ == "__main__":
    main()
