"""CudaTritonBackend.preprocess on CPU with real Triton AOT compiles (few distinct kernels, one cache per session).

Checks: the blob read back by the blob module's reader equals what the preprocess wrote; every cubin is an ELF
for the arch it claims (ELF e_flags, and the triton wheel's cuobjdump when present); identical kernels are
stored once per arch, in a blob and across the blobs of a .pte (cubins are content-addressed named data); weights are the template's prepared layout in the NamedDataStore; to_executorch()
serializes; an external tag writes a .ptd; the partitioner's prefetch compiles exactly what the preprocess
needs; scripts/export_pte.py writes the .pte and its reference input/output pair. The partitioner takes only
convolutions here (`lower`), so the ReLUs stay on the CPU and split partitions.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import cuda_triton.backend as backend
import pytest
import torch
import triton
from cuda_triton import CudaTritonOptions, CudaTritonPartitioner
from cuda_triton.conv.compile_pool import CompileJob
from cuda_triton.conv.params import ConvParams
from cuda_triton.conv.problem import ConvProblem
from cuda_triton.conv.templates import get_template
from cuda_triton.partition.config import configs_for
from cuda_triton.preprocess import assemble as assemble_mod
from cuda_triton.preprocess import kernels
from cuda_triton.preprocess.draft import tensor_bytes
from cuda_triton.preprocess.schedule import TuningLookup, choose_schedule
from cuda_triton.serialization import ConvRecord
from cuda_triton.serialization import blob as blob_mod
from cuda_triton.utils.conv import conv_problem
from executorch.exir import to_edge, to_edge_transform_and_lower
from executorch.exir.lowered_backend_module import LoweredBackendModule
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


pytestmark = pytest.mark.usefixtures("fresh_triton_cache")


class Tiny(nn.Module):
    """Three chained convs (one partition); b and c are the same convolution, so they share kernels."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.b = nn.Conv2d(8, 8, 3, padding=1)
        self.c = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.c(self.b(self.a(x))))


def example(dtype=torch.float32):
    return (torch.randn(1, 4, 10, 10).to(dtype),)


class Capture:
    """Records every DelegateBlob the preprocess serializes, with its bytes."""

    def __init__(self, monkeypatch) -> None:
        self.written: list[tuple[blob_mod.DelegateBlob, bytes]] = []
        real = blob_mod.serialize

        def spy(b):
            data = real(b)
            self.written.append((b, data))
            return data

        monkeypatch.setattr(assemble_mod, "serialize", spy)


def lower(model, xs, api="transform_and_lower", **options):
    """Lowered with the convolution config alone, so the ReLUs stay on the CPU and split partitions."""
    ep = torch.export.export(model.eval(), xs)
    p = CudaTritonPartitioner(configs=configs_for(["conv"]), **options)
    if api == "transform_and_lower":
        return to_edge_transform_and_lower(ep, partitioner=[p]), p
    return to_edge(ep).to_backend(p), p


def lowered_modules(edge) -> list[LoweredBackendModule]:
    gm = edge.exported_program().graph_module
    return [m for _, m in gm.named_children() if isinstance(m, LoweredBackendModule)]


def elf_arch(cubin: bytes) -> int:
    assert cubin[:4] == b"\x7fELF" and cubin[4] == 2, "not a 64-bit ELF"
    assert struct.unpack_from("<H", cubin, 18)[0] == 190, "e_machine is not EM_CUDA"
    return struct.unpack_from("<I", cubin, 48)[0] & 0xFF  # EF_CUDA_SM: the SM number


def cuobjdump_sm(cubin: bytes, tmp: Path) -> str | None:
    if not CUOBJDUMP.exists():
        return None
    f = tmp / "k.cubin"
    f.write_bytes(cubin)
    out = subprocess.run([str(CUOBJDUMP), "-elf", str(f)], capture_output=True, text=True, check=True).stdout
    for token in out.replace(",", " ").split():
        if token.startswith("sm="):
            return token[3:]
    raise AssertionError(f"cuobjdump printed no sm=: {out[:300]}")


@pytest.fixture(scope="module")
def tiny_fp32():
    mp = pytest.MonkeyPatch()
    cap = Capture(mp)
    jobs_seen: list[dict] = []
    real_compile_all = kernels.compile_all

    def spy_compile_all(jobs):
        jobs_seen.append(dict(jobs))
        return real_compile_all(jobs)

    mp.setattr(kernels, "compile_all", spy_compile_all)
    torch.manual_seed(0)
    model = Tiny()
    try:
        edge, p = lower(model, example())
    finally:
        mp.undo()
    return model, edge, p, cap.written, jobs_seen


def test_blob_reads_back_equal_to_what_was_written(tiny_fp32):
    _, edge, p, written, _ = tiny_fp32
    (lowered,) = lowered_modules(edge)
    assert len(written) == 1
    blob, data = written[0]
    assert lowered.processed_bytes == data
    back = blob_mod.deserialize(lowered.processed_bytes, backend.named_data_of(lowered))
    assert back == blob
    assert all(k.cubin is None for k in blob_mod.deserialize(lowered.processed_bytes).kernels)
    assert back.triton_version == triton.__version__
    # Three convolutions, then a copy of c's channels-last result (inside the delegate tensors are channels-last)
    # into the contiguous delegate output.
    assert back.num_inputs == 1 and back.num_outputs == 1 and len(back.ops) == 4
    assert [type(op).__name__ for op in back.ops] == ["ConvRecord"] * 3 + ["ElementwiseRecord"]
    assert p.last_report.num_delegated == 3 and len(p.last_report.partitions) == 1


def test_cubins_are_elf_for_their_arch(tiny_fp32, tmp_path):
    _, edge, _, _, _ = tiny_fp32
    (lowered,) = lowered_modules(edge)
    blob = backend.read_lowered(lowered)
    assert {k.arch for k in blob.kernels} == {80, 90}
    for k in blob.kernels:
        assert elf_arch(k.cubin) == k.arch
        sm = cuobjdump_sm(k.cubin, tmp_path)
        if sm is not None:
            assert sm == ("90a" if k.arch == 90 else str(k.arch))
        assert k.param_types and k.param_types[0] == "ptr"


def test_identical_kernels_are_stored_once_per_arch(tiny_fp32):
    _, edge, _, _, _ = tiny_fp32
    (lowered,) = lowered_modules(edge)
    blob = backend.read_lowered(lowered)
    seen = {(k.arch, k.cubin) for k in blob.kernels}
    assert len(seen) == len(blob.kernels)
    _, b, c, _ = blob.ops
    for lb, lc in zip(b.launches, c.launches, strict=True):
        assert lb.kernels == lc.kernels  # same convolution: the same kernel records
    used = {i for op in blob.ops for launch in op.launches for i in launch.kernels.values()}
    assert used == set(range(len(blob.kernels)))


def test_weights_are_prepared_and_stored_as_named_data(tiny_fp32):
    model, edge, _, _, _ = tiny_fp32
    (lowered,) = lowered_modules(edge)
    blob = blob_mod.deserialize(lowered.processed_bytes)
    store = lowered.named_data_store_output
    assert store is not None and not store.external_data
    x = example()[0]
    convs = [op for op in blob.ops if isinstance(op, ConvRecord)]
    for op, conv in zip(convs, (model.a, model.b, model.c), strict=True):
        w = conv.weight.detach()
        params = ConvParams(
            tuple(op.stride), tuple(op.padding_before), tuple(op.padding_after), tuple(op.dilation),
            op.transposed, tuple(op.output_padding), op.groups,
        )  # fmt: skip
        xin = blob.values[op.input]  # as the delegate stores it: the model's input, then channels-last
        assert xin.sizes == ([1, 4, 10, 10] if conv is model.a else [1, 8, 10, 10])
        problem = ConvProblem.from_shapes(
            tuple(xin.sizes), tuple(xin.strides), tuple(op.weight_sizes), tuple(op.weight_strides), True, params,
            x.dtype, True,
        )  # fmt: skip
        template, schedule, _ = choose_schedule(problem, TuningLookup(CudaTritonOptions()))
        assert template.name == op.template and schedule.key() == op.schedule
        expected = tensor_bytes(get_template(op.template).prepare_weight(w, problem, schedule))
        for index, payload in ((op.weight, expected), (op.bias, tensor_bytes(conv.bias.detach()))):
            rec = blob.constants[index]
            entry = store.pte_data[rec.key]
            assert bytes(store.buffers[entry.buffer_index]) == payload
            assert rec.nbytes == len(payload)


def test_the_shipped_tuning_table_chooses_schedules():
    """A convolution the shipped sm_90 table holds gets the table's schedule (not only the heuristics')."""
    from cuda_triton.conv import tuning

    table = tuning.load_table(arch=90)
    assert table.entries, "the shipped tuning table is empty"
    entry = table.entries[0]
    template, schedule, tuned = choose_schedule(
        entry.problem, TuningLookup(CudaTritonOptions(archs=(80, 90)))
    )
    assert tuned and (template.name, schedule) == (entry.template, entry.schedule)


def test_to_executorch_serializes(tiny_fp32):
    _, edge, _, _, _ = tiny_fp32
    buf = edge.to_executorch().buffer
    (lowered,) = lowered_modules(edge)
    blob = backend.read_lowered(lowered)
    assert lowered.processed_bytes in buf
    for rec in blob.constants:
        assert rec.key.encode() in buf  # the named data key the runtime asks for
    for k in blob.kernels:
        assert k.cubin is not None and k.cubin_key.encode() in buf and buf.count(k.cubin) == 1


def test_prefetch_submits_exactly_what_preprocess_compiles(tiny_fp32):
    _, _, p, _, jobs_seen = tiny_fp32
    (jobs,) = jobs_seen
    opts = p.options
    assert len(p.last_report.decisions) == 3
    expected: dict = {}
    params = ConvParams((1, 1), (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    cl = torch.channels_last  # weights declared channels-last, intermediates stored so (the layout plan)
    a = conv_problem(
        torch.empty(1, 4, 10, 10), torch.empty(8, 4, 3, 3).to(memory_format=cl), True, params, True
    )
    b = conv_problem(torch.empty(1, 8, 10, 10).to(memory_format=cl), torch.empty(8, 8, 3, 3).to(memory_format=cl),
                     True, params, True)  # fmt: skip
    for problem in (a, b):  # c is b's problem
        expected.update(kernels.conv_jobs(problem, opts))
    convs = {key for key, job in jobs.items() if isinstance(job, CompileJob)}  # not the output copy's kernel
    assert convs == set(expected) and len(jobs) > len(convs)


def test_external_tag_writes_a_ptd(tmp_path):
    torch.manual_seed(0)
    model = Tiny()
    edge, _ = lower(model, example(), "to_backend", external_tag="tiny_weights")
    (lowered,) = lowered_modules(edge)
    assert set(lowered.named_data_store_output.external_data) == {"tiny_weights"}
    prog = edge.to_executorch()
    prog.write_tensor_data_to_file(str(tmp_path))
    ptd = tmp_path / "tiny_weights.ptd"
    assert ptd.exists()
    data = ptd.read_bytes()
    w = tensor_bytes(model.c.bias.detach())
    assert w in data and w not in prog.buffer
    for k in backend.read_lowered(lowered).kernels:  # cubins are code: they stay in the .pte
        assert k.cubin is not None and prog.buffer.count(k.cubin) == 1 and k.cubin not in data


def test_fp16_sm90_only(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1)).to(torch.float16)
    edge, p = lower(model, example(torch.float16), "to_backend", archs=(90,))
    (lowered,) = lowered_modules(edge)
    blob = backend.read_lowered(lowered)
    assert blob.archs == [90]
    assert {v.dtype for v in blob.values} == {"fp16"} and {c.dtype for c in blob.constants} == {"fp16"}
    for k in blob.kernels:
        assert k.arch == 90 and elf_arch(k.cubin) == 90
    assert edge.to_executorch().buffer


def test_export_pte_script(tmp_path):
    module_file = tmp_path / "tiny_net.py"
    module_file.write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.a = nn.Conv2d(4, 8, 3, padding=1)\n"
        "        self.b = nn.Conv2d(8, 8, 3, padding=1)\n\n"
        "    def forward(self, x):\n"
        "        return self.b(torch.relu(self.a(x)))\n"
    )
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import export_pte
    finally:
        sys.path.pop(0)
    out = tmp_path / "out" / "net.pte"
    report = tmp_path / "report.json"
    rc = export_pte.main(
        ["--module", f"{module_file}:Net", "--input-shape", "1,4,10,10", "--out", str(out),
         "--external-weights", "--report-json", str(report)]
    )  # fmt: skip
    assert rc == 0
    for suffix in (".pte", ".input0.bin", ".ref.bin", ".io.json"):
        assert (out.parent / f"net{suffix}").exists(), suffix
    assert (out.parent / "net.ptd").exists()
    io = json.loads((out.parent / "net.io.json").read_text())
    assert io["inputs"][0]["shape"] == [1, 4, 10, 10] and io["data_files"] == ["net.ptd"]
    (ref_out,) = io["reference"]["outputs"]
    assert ref_out["shape"] == [1, 8, 10, 10]
    assert (out.parent / "net.ref.bin").stat().st_size == ref_out["nbytes"] == 800 * 4
    # The reference is the eager model on the saved input.
    x = torch.frombuffer(bytearray((out.parent / "net.input0.bin").read_bytes()), dtype=torch.float32)
    assert x.numel() == 400
    rep = json.loads(report.read_text())
    assert rep["delegated"] == rep["convs"] == 2 and rep["partitions"] == 1  # the ReLU runs in the delegate


class Chain(Tiny):
    """Tiny's convs split by ReLUs: three partitions; the last two convs are the same problem."""

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def test_identical_cubins_are_stored_once_per_pte(tmp_path):
    """Partitions that use the same kernel share one copy of its cubin in the .pte."""
    torch.manual_seed(0)
    edge, p = lower(Chain(), example())
    mods = lowered_modules(edge)
    assert len(mods) == 3 and len(p.last_report.partitions) == 3
    blobs = [backend.read_lowered(m) for m in mods]
    records = [k for b in blobs for k in b.kernels]
    cubins = {k.cubin_key: k.cubin for k in records}
    assert len(records) > len(cubins)  # the same kernel is referenced from several blobs
    for k in records:
        assert k.cubin is not None and k.cubin_key == blob_mod.cubin_named_key(k.arch, k.cubin)
    buf = edge.to_executorch().buffer
    for key, cubin in cubins.items():
        assert cubin is not None and buf.count(cubin) == 1, f"cubin {key} is stored {buf.count(cubin)} times"
    for m in mods:
        assert bytes(m.processed_bytes) in buf
        assert not any(c in bytes(m.processed_bytes) for c in cubins.values())  # no cubin inside a blob
