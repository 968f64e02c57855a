"""Demo: export a zoo model to a .pte whose convolutions are AOT-compiled Triton kernels, and print the report.

    python scripts/demo.py                      # the small mixed 'demo' net -> exports/demo.pte
    python scripts/demo.py --model resnet50     # any zoo model (scripts/export_pte.py --list)
    python scripts/demo.py --canonical          # also print each convolution's canonical triton.convolution call

Everything after the demo's own flags is passed to scripts/export_pte.py (e.g. --dtype fp16 --archs 90).
No GPU is needed: the cubins are compiled on this machine. Run the .pte on a GPU with
``cuda_triton_runner --model_path exports/demo.pte --inputs exports/demo.input0.bin``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def print_canonical_calls(model_name: str) -> None:
    """Bind every convolution of the exported model and print its canonical call and CUDA output layout."""
    from cuda_triton.conv import bind_conv, out_shape_and_stride
    from cuda_triton.conv.binding import is_conv_node
    from cuda_triton.models.zoo import build

    model, example = build(model_name)
    ep = torch.export.export(model, example)
    print(f"canonical convolution calls of '{model_name}':")
    for node in ep.graph.nodes:
        if not is_conv_node(node):
            continue
        a = bind_conv(node)
        x, w = a.input.meta["val"], a.weight.meta["val"]
        sizes, strides = out_shape_and_stride(
            list(x.shape), list(x.stride()), list(w.shape), list(w.stride()),
            list(a.stride), list(a.padding_before), list(a.padding_after), list(a.dilation),
            a.transposed, list(a.output_padding), a.groups, x.dtype == torch.float64,
        )  # fmt: skip
        print(f"{node.name:<14} {node.target}")
        print(
            f"  triton.convolution(input{list(x.shape)}, weight{list(w.shape)}, bias={a.bias is not None}, "
            f"stride={list(a.stride)}, padding_before={list(a.padding_before)}, "
            f"padding_after={list(a.padding_after)}, dilation={list(a.dilation)}, transposed={a.transposed}, "
            f"output_padding={list(a.output_padding)}, groups={a.groups})"
        )
        print(f"  -> output sizes {sizes}, CUDA strides {strides}")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description="export a zoo model to a .pte and print the partition report")
    ap.add_argument("--model", default="demo", help="zoo model (default: demo)")
    ap.add_argument("--canonical", action="store_true", help="print each convolution's canonical call first")
    args, rest = ap.parse_known_args()
    if args.canonical:
        print_canonical_calls(args.model)
    import export_pte

    return export_pte.main(["--model", args.model, *rest])


if __name__ == "__main__":
    sys.exit(main())
