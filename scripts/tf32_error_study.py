#!/usr/bin/env python
"""CPU emulation of TF32 convolutions: which operand rounding keeps zoo models under the fp32 threshold.

    PYTHONPATH=backends python scripts/tf32_error_study.py [--models wavenet demo ...] [--seeds 0 1 2]

Every convolution of a zoo model (fp32, the export's seed and input) is replaced by one whose input and weight
are first converted to TF32, the way a tensor core would see them, then convolved on the CPU in fp32 (products
of two TF32 values are exact in fp32, and the sum is accumulated in fp32 like the GPU's MMA accumulator). The
bias, and every operator between convolutions, stay in exact fp32. Variants:

* ``exact``: no conversion (the CPU fp32 model itself: error 0 by construction, a sanity row);
* ``trunc/trunc``: input and weight truncated (what ``tl.dot(input_precision="tf32")`` does to fp32 operands);
* ``rn-w/trunc-x``: weight rounded to nearest (free: done once at export), input truncated by the MMA;
* ``rn/rn``: both rounded to nearest (cuDNN's ``cvt.rna.tf32.f32``).

``--pipeline`` (CPU machine with executorch) also runs each model through the real export with TF32 allowed
(CudaTritonPartitioner, prepared weights from the delegate's named data) and the kernels in Triton's
interpreter (scripts/emulate_pte.py): the interpreter's dot is plain fp32, so with the kernels' TF32 rounding
it computes what the GPU's TF32 MMAs do up to summation order; that column predicts the GPU run.

The error is measured like scripts/gpu_validate.py: max |out - ref| / max |ref| over the output, with ``ref``
the CPU fp32 model (export_pte.py's reference). ``fp64`` also reports the fp32 reference's own error against an
fp64 run, to show the reference is far more exact than the threshold (1e-3 for fp32 with TF32).
"""

from __future__ import annotations

import os

# A CPU study: --pipeline runs the kernels in Triton's interpreter, which must be chosen before they are imported.
os.environ.setdefault("TRITON_INTERPRET", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backends"))
from cuda_triton.conv.tf32 import round_to_tf32, truncate_to_tf32  # noqa: E402
from cuda_triton.models.zoo import build  # noqa: E402

Convert = Callable[[torch.Tensor], torch.Tensor]
CONVS = {
    torch.nn.functional.conv1d,
    torch.nn.functional.conv2d,
    torch.nn.functional.conv3d,
    torch.nn.functional.conv_transpose1d,
    torch.nn.functional.conv_transpose2d,
    torch.nn.functional.conv_transpose3d,
}


def _identity(t: torch.Tensor) -> torch.Tensor:
    return t


VARIANTS: dict[str, tuple[Convert, Convert]] = {  # name: (input conversion, weight conversion)
    "exact": (_identity, _identity),
    "trunc/trunc": (truncate_to_tf32, truncate_to_tf32),
    "rn-w/trunc-x": (truncate_to_tf32, round_to_tf32),
    "rn/rn": (round_to_tf32, round_to_tf32),
}


class TF32Convs(TorchFunctionMode):
    """Converts the input and weight of every convolution before it runs (fp32 tensors only)."""

    def __init__(self, conv_input: Convert, conv_weight: Convert) -> None:
        super().__init__()
        self.conv_input = conv_input
        self.conv_weight = conv_weight
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func in CONVS and args[0].dtype == torch.float32:
            self.count += 1
            args = (self.conv_input(args[0]), self.conv_weight(args[1]), *args[2:])
        return func(*args, **kwargs)


def rel_to_max(out: torch.Tensor, ref: torch.Tensor) -> float:
    """gpu_validate.compare's metric: max |out - ref| / max |ref|."""
    return ((out.double() - ref.double()).abs().max() / ref.double().abs().max().clamp_min(1e-12)).item()


def study(model_name: str, seed: int) -> dict[str, Any]:
    model, example = build(model_name, torch.float32, seed=seed)
    x = example[0]
    res: dict[str, Any] = {"model": model_name, "seed": seed}
    t0 = time.perf_counter()
    with torch.no_grad():
        ref = model(x)
        res["fp64"] = rel_to_max(ref, model.double()(x.double()))
        model.float()
        for name, (cx, cw) in VARIANTS.items():
            mode = TF32Convs(cx, cw)
            with mode:
                out = model(x)
            res[name] = rel_to_max(out, ref)
            res["convs"] = mode.count
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def pipeline(model_name: str, seed: int) -> float:
    """The exported program with TF32 allowed, delegates emulated by the interpreter, against the fp32 model."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import emulate_pte

    model, example = build(model_name, torch.float32, seed=seed)
    with torch.no_grad():
        ref = model(*example)
    ep = emulate_pte.lower(model, example, allow_tf32=True)
    run = emulate_pte.run_program(ep, example, allow_tf32=True)
    out = run.output[0] if isinstance(run.output, (tuple, list)) else run.output
    return rel_to_max(out, ref)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["wavenet", "demo", "video", "resnet18", "unet"])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0])
    ap.add_argument("--threads", type=int, default=1, help="CPU threads (the dev machine's cores are shared)")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--pipeline", action="store_true", help="also the real export + interpreted kernels")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    cols = ["fp64", *VARIANTS, *(["pipeline"] if args.pipeline else [])]
    print("| model | seed | convs | " + " | ".join(cols) + " |")
    print("|---|---|---|" + "---|" * len(cols))
    rows = []
    for name in args.models:
        for seed in args.seeds:
            r = study(name, seed)
            if args.pipeline:
                t0 = time.perf_counter()
                r["pipeline"] = pipeline(name, seed)
                r["pipeline_seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(r)
            cells = " | ".join(f"{r[c]:.2e}" for c in cols)
            print(f"| {name} | {seed} | {r['convs']} | {cells} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
