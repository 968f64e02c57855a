"""Programmatic dependent launch (cuda_triton.kernel.pdl): the PTX rewrite, the AOT compile that uses it, the
compile spec, and the blob's kernel flag an export with it writes. No GPU: the runtime's side (the launch
attribute from the flag) is in the fake-driver tests, the speed in scripts/bench_models.py on a GPU."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # as conftest does on CPU machines; aot.py copes with it

import pytest  # noqa: E402
import torch  # noqa: E402
from cuda_triton.conv import ConvParams, ConvProblem  # noqa: E402
from cuda_triton.conv.templates import get_template  # noqa: E402
from cuda_triton.kernel.aot import compile_cache_key, compile_launches  # noqa: E402
from cuda_triton.kernel.pdl import (  # noqa: E402
    SIGNAL,
    WAIT,
    PtxRewriteError,
    uses_pdl,
    wait_for_prior_grids,
)
from cuda_triton.partition.options import CudaTritonOptions  # noqa: E402

PTX = """//
.version 8.7
.target sm_90a
.address_size 64

	// .globl	k                       // -- Begin function k
                                        // @k
.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0,
	.param .u32 k_param_1
)
.reqntid 128
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<7>;

	.loc	1 5 0
$L__func_begin0:
// %bb.0:
	ld.param.b64 	%rd3, [k_param_0];
	ret;
}
"""


def _instructions(ptx: str) -> list[str]:
    body = ptx[ptx.index("{") + 1 :]
    return [
        line.strip()
        for line in body.splitlines()
        if line.strip() and not line.strip().startswith((".reg", ".loc", "//", "$"))
    ]


@pytest.mark.timeout(30)
def test_the_wait_then_the_signal_come_first_after_the_declarations() -> None:
    out = wait_for_prior_grids(PTX)
    assert _instructions(out)[:3] == [WAIT, SIGNAL, "ld.param.b64 \t%rd3, [k_param_0];"]
    # the declarations stay ahead of every instruction, and nothing else moves
    assert out.index(".reg .b32") < out.index(WAIT)
    assert out.replace(f"\t{WAIT}\n", "").replace(f"\t{SIGNAL}\n", "") == PTX


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "ptx, why",
    [
        ("// no kernel here\n", "expected one .entry"),
        (PTX + PTX.replace("entry k(", "entry k2("), "expected one .entry"),
        (PTX.replace("{", "", 1).replace("}", ""), "has no body"),
        (".visible .entry k()\n{\n\t.reg .b32 %r<1>;\n}\n", "has no instruction"),
    ],
)
def test_ptx_of_another_shape_is_refused(ptx: str, why: str) -> None:
    with pytest.raises(PtxRewriteError, match=why):
        wait_for_prior_grids(ptx)


@pytest.mark.timeout(30)
def test_only_sm90_and_later_use_it() -> None:
    assert uses_pdl(True, 90) and not uses_pdl(True, 80) and not uses_pdl(False, 90)


def _launch():
    p = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    problem = ConvProblem.from_shapes(
        (1, 32, 16, 16), (8192, 1, 512, 32), (64, 32, 3, 3), (288, 1, 96, 32), True, p, "float16", True
    )
    template = get_template("implicit_gemm")
    return template.launches(problem, template.heuristic_schedule(problem))[0]


@pytest.mark.timeout(600)
def test_an_sm90_compile_for_pdl_waits_and_is_flagged_and_sm80_is_untouched() -> None:
    launch = _launch()
    (plain,) = compile_launches([launch], 90)
    (pdl,) = compile_launches([launch], 90, pdl=True)
    assert not plain.launch_pdl and WAIT not in plain.ptx
    assert pdl.launch_pdl
    assert _instructions(pdl.ptx)[:2] == [WAIT, SIGNAL]
    assert pdl.cubin and pdl.cubin != plain.cubin
    assert pdl.param_types == plain.param_types
    (sm80,) = compile_launches([launch], 80, pdl=True)
    assert not sm80.launch_pdl and WAIT not in sm80.ptx
    # distinct cache keys for distinct code; sm_80 has one kernel either way
    assert compile_cache_key(launch, 90, True) != compile_cache_key(launch, 90)
    assert compile_cache_key(launch, 80, True) == compile_cache_key(launch, 80)


@pytest.mark.timeout(30)
def test_the_compile_spec_round_trips_and_is_off_by_default() -> None:
    assert not CudaTritonOptions().programmatic_launch
    on = CudaTritonOptions(programmatic_launch=True)
    assert CudaTritonOptions.from_compile_specs(on.compile_specs()).programmatic_launch
    specs = {s.key: bytes(s.value) for s in on.compile_specs()}
    assert specs["programmatic_launch"] == b"1"


@pytest.mark.timeout(900)
def test_an_export_with_it_flags_its_sm90_kernels_only() -> None:
    from cuda_triton import CudaTritonPartitioner
    from cuda_triton.serialization.blob import deserialize
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(8, 16, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.conv(x)) * 2.0

    model = Net().eval()
    example = (torch.randn(1, 8, 12, 12),)
    options = CudaTritonOptions(archs=(80, 90), programmatic_launch=True)
    lowered = to_edge_transform_and_lower(
        torch.export.export(model, example), partitioner=[CudaTritonPartitioner(options)]
    )
    gm = lowered.exported_program().graph_module
    blobs = [
        deserialize(m.processed_bytes) for _, m in gm.named_children() if isinstance(m, LoweredBackendModule)
    ]
    assert len(blobs) == 1
    kernels = blobs[0].kernels
    assert kernels and {k.arch for k in kernels} == {80, 90}
    for k in kernels:
        assert k.launch_pdl == (k.arch == 90), (k.name, k.arch)
