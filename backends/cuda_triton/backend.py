"""`CudaTritonBackend`: the AOT preprocess that turns a delegated subgraph into a delegate blob.

For each convolution of a partition (in graph order) the preprocess

1. binds it (`bind_conv`), folding a zero spatial ``constant_pad_nd`` the partitioner put in front of it
   (`cuda_triton.partition.graph.pad_fold`, the same function the partitioner used), and an inference batch
   norm it put after it (`cuda_triton.partition.graph.batch_norm_fold`): the weight and bias become the folded
   ones (`fold_batch_norm`: per-channel terms in float64, cast to the convolution's dtype) and the convolution
   writes the batch norm's output; everything below sees a convolution with a bias;
2. builds its `ConvProblem` (static shapes and the recorded strides) and picks one (template, schedule): the
   tuning table's answer for the primary target arch (the highest one) when it has one, else the first
   supporting template's heuristic (`templates.select_candidate`, the same choice the eager op makes);
3. lays the weight out the way the kernels read it (``template.prepare_weight``), and stores weight and bias in
   ExecuTorch's NamedDataStore under content-addressed keys (in the .pte, or ``<tag>.ptd`` with an external tag);
4. asks the template for its `KernelLaunch` list and compiles every distinct kernel (``compile_cache_key``) for
   every target arch with ``conv.aot.compile_launch`` - across all partitions of the program at once
   (`preprocess_multimethod`), in `conv.compile_pool`'s process pool with a progress bar; Triton's own cache
   (``TRITON_CACHE_DIR``) makes a re-export cheap;
5. writes the blob (`cuda_triton.serialization.blob.serialize`), each identical kernel once per arch; the cubins
   themselves go to the NamedDataStore under content-addressed keys (always in the .pte, never in a .ptd:
   they are code, not weights), so a cubin that several partitions use is stored once per .pte.

Environment: ``TRITON_DISABLE_LINE_INFO`` defaults to 1 here (smaller cubins); ``CUDA_TRITON_JOBS`` and
``CUDA_TRITON_PROGRESS`` set the compile pool's workers and progress bar (`cuda_triton.conv.compile_pool`);
``CUDA_TRITON_PREFETCH=0`` stops the partitioner from starting compiles early.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import triton
from executorch.exir._serialize._named_data_store import NamedDataStore
from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult
from executorch.exir.backend.compile_spec_schema import CompileSpec
from torch.export import ExportedProgram
from torch.fx import Node

from .conv.aot import CompiledKernel, abi_types, compile_cache_key
from .conv.binding import ConvArgs, bind_conv, is_conv_node
from .conv.compile_pool import CompileJob, compile_all, default_pool
from .conv.params import ConvParams
from .conv.problem import ConvProblem
from .conv.templates import ConvTemplate, KernelLaunch, Schedule, select_candidate
from .conv.templates._f16_mma import f16_mma_policy
from .conv.templates.base import TRITON_PTR_DTYPE, ScalarArg, TensorArg
from .partition.graph import (
    BatchNormFold,
    batch_norm_fold,
    constant_names,
    conv_constants,
    conv_problem,
    is_batch_norm_node,
    is_pad_node,
    pad_fold,
    tensor_val,
)
from .partition.options import CudaTritonOptions
from .serialization.blob import (
    ConstantRecord,
    ConstantRef,
    DelegateBlob,
    KernelRecord,
    LaunchRecord,
    NullPtr,
    OpRecord,
    Scalar,
    ValueRecord,
    ValueRef,
    deserialize,
    named_cubins,
    serialize,
)

logger = logging.getLogger("cuda_triton.backend")

# Cubins without line info are ~2.7x smaller; the runtime has no use for it. Set before any compile (forked
# compile workers inherit it); a user who wants line info sets TRITON_DISABLE_LINE_INFO=0 explicitly.
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")

BLOB_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64"}
CONSTANT_ALIGNMENT = 64
CUBIN_ALIGNMENT = 64
KEY_PREFIX = "cuda_triton/"


class CudaTritonPreprocessError(RuntimeError):
    """A delegated subgraph the preprocess cannot turn into a blob (names the node and why)."""


# ---- statistics (read by scripts/export_pte.py) --------------------------------------------------------------
@dataclass
class PreprocessStats:
    partitions: int = 0
    ops: int = 0
    launches: int = 0
    kernels_unique: int = 0  # distinct (kernel, arch) compiled
    kernels_in_blobs: int = 0  # kernel records written, summed over blobs
    compile_seconds: float = 0.0
    total_seconds: float = 0.0
    blob_bytes: int = 0
    constant_bytes: int = 0
    cubin_bytes: int = 0  # distinct cubins stored as named data (each once per .pte)
    cubins_unique: int = 0
    tuned_ops: int = 0  # schedules taken from a tuning table
    templates: dict[str, int] = field(default_factory=dict)

    def merge(self, other: PreprocessStats) -> None:
        for name in (
            "partitions", "ops", "launches", "kernels_unique", "kernels_in_blobs", "compile_seconds",
            "total_seconds", "blob_bytes", "constant_bytes", "cubin_bytes", "cubins_unique", "tuned_ops",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for k, v in other.templates.items():
            self.templates[k] = self.templates.get(k, 0) + v


STATS_HISTORY: list[PreprocessStats] = []


def last_stats() -> PreprocessStats | None:
    return STATS_HISTORY[-1] if STATS_HISTORY else None


def reset_stats() -> None:
    STATS_HISTORY.clear()


# ---- compile jobs ---------------------------------------------------------------------------------------------
def prefetch_enabled() -> bool:
    return os.environ.get("CUDA_TRITON_PREFETCH", "1").strip().lower() not in ("0", "false", "off", "no")


_KEYS: dict[tuple, str] = {}  # (template, problem, schedule, launch index, arch) -> compile key


def launch_key(
    template: str, problem: ConvProblem, schedule: Schedule, index: int, launch: KernelLaunch, arch: int
) -> str:
    """``compile_cache_key(launch, arch)``, memoized (it hashes the kernel's source, tens of ms each)."""
    mk = (template, problem, schedule, index, int(arch))
    key = _KEYS.get(mk)
    if key is None:
        key = _KEYS[mk] = compile_cache_key(launch, arch)
    return key


def conv_jobs(
    problem: ConvProblem, options: CudaTritonOptions, tuning: _Tuning | None = None
) -> dict[str, CompileJob]:
    """The compile jobs (key -> job) of one convolution, with the schedule the preprocess will choose."""
    template, schedule, _ = _choose(problem, tuning or _Tuning(options))
    jobs: dict[str, CompileJob] = {}
    for li, launch in enumerate(template.launches(problem, schedule)):
        for arch in options.archs:
            key = launch_key(template.name, problem, schedule, li, launch, arch)
            jobs[key] = CompileJob(template.name, problem, schedule, li, arch)
    return jobs


def prefetch(problems: list[ConvProblem], options: CudaTritonOptions) -> int:
    """Start compiling the kernels of these convolutions in the background (the partitioner calls this).

    Returns how many compile jobs were submitted. A wrong guess only costs CPU time: the preprocess compiles
    exactly what it needs and reuses what was prefetched.
    """
    pool = default_pool()
    if not prefetch_enabled() or pool.executor() is None:
        return 0
    tuning = _Tuning(options)
    jobs: dict[str, CompileJob] = {}
    for problem in problems:
        try:
            jobs.update(conv_jobs(problem, options, tuning))
        except Exception as e:  # never let a speculative compile break partitioning
            logger.debug("cuda_triton: prefetch skipped a convolution: %s", e)
    before = pool.pending
    pool.submit(jobs)
    return pool.pending - before


# ---- one program -> a draft blob --------------------------------------------------------------------------------
@dataclass
class _Launch:
    launch: KernelLaunch
    keys: dict[int, str]  # arch -> compile key
    args: list[Any]


@dataclass
class _Op:
    record: OpRecord
    launches: list[_Launch]


@dataclass
class _Draft:
    options: CudaTritonOptions
    values: list[ValueRecord] = field(default_factory=list)
    constants: list[ConstantRecord] = field(default_factory=list)
    constant_data: list[bytes] = field(default_factory=list)
    constant_index: dict[str, int] = field(default_factory=dict)
    ops: list[_Op] = field(default_factory=list)
    num_inputs: int = 0
    num_outputs: int = 0
    tuned_ops: int = 0
    templates: dict[str, int] = field(default_factory=dict)


def _describe(node: Node) -> str:
    from .conv.routing import describe_node

    return describe_node(node)


def _blob_dtype(t: torch.Tensor, what: str) -> str:
    if t.dtype not in BLOB_DTYPES:
        raise CudaTritonPreprocessError(f"{what} has dtype {t.dtype}, which the delegate does not handle")
    return BLOB_DTYPES[t.dtype]


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def _add_constant(draft: _Draft, t: torch.Tensor, what: str) -> int:
    data = _tensor_bytes(t)
    dtype = _blob_dtype(t, what)
    digest = hashlib.sha256(f"{dtype}{list(t.shape)}".encode() + data).hexdigest()[:40]
    key = KEY_PREFIX + digest
    hit = draft.constant_index.get(key)
    if hit is not None:
        return hit
    draft.constant_index[key] = len(draft.constants)
    draft.constants.append(ConstantRecord(key, len(data), dtype, [int(s) for s in t.shape]))
    draft.constant_data.append(data)
    return len(draft.constants) - 1


def _contiguous_strides(sizes: tuple[int, ...]) -> list[int]:
    strides, running = [], 1
    for s in reversed(sizes):
        strides.append(running)
        running *= s
    return strides[::-1]


def _value_record(kind: str, index: int, node: Node) -> ValueRecord:
    v = tensor_val(node)
    return ValueRecord(kind, index, _blob_dtype(v, f"node '{node.name}'"), [int(s) for s in v.shape],
                       [int(s) for s in v.stride()])  # fmt: skip


class _Tuning:
    """The tuning lookup for one options set (table path, primary arch)."""

    def __init__(self, options: CudaTritonOptions) -> None:
        self.arch = max(options.archs)
        self.tf32_on_fp16 = options.tf32_on_fp16
        self.table: Any = None
        self.lookup: Any = None
        try:
            from .conv import tuning
        except ImportError:  # the tuning module has not landed: heuristics only
            return
        self.lookup = tuning.lookup
        if options.tuning_table:
            self.table = tuning.load_table(options.tuning_table, arch=self.arch)

    def __call__(self, problem: ConvProblem) -> tuple[str, Schedule] | None:
        if self.lookup is None:
            return None
        return self.lookup(problem, self.arch, self.table)


def _choose(problem: ConvProblem, tuning: _Tuning) -> tuple[ConvTemplate, Schedule, bool]:
    hits: list[tuple[str, Schedule]] = []

    def lookup(p: ConvProblem) -> tuple[str, Schedule] | None:
        hit = tuning(p)
        if hit is not None:
            hits.append(hit)
        return hit

    with f16_mma_policy(tuning.tf32_on_fp16):  # the export's choice of fp32 precisions (CudaTritonOptions)
        cand = select_candidate(problem, lookup)
    tuned = bool(hits) and hits[0][0] == cand.template.name and hits[0][1] == cand.schedule
    return cand.template, cand.schedule, tuned


def _draft_program(ep: ExportedProgram, options: CudaTritonOptions, jobs: dict[str, CompileJob]) -> _Draft:
    draft = _Draft(options)
    tuning = _Tuning(options)
    gm = ep.graph_module
    consts = constant_names(ep)
    value_of: dict[Node, int] = {}
    bn_folded: set[Node] = set()  # batch norms (and their getitems) a convolution folded

    output_node = gm.graph.output_node()
    outs = output_node.args[0]
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    out_index: dict[Node, int] = {}
    for j, n in enumerate(outs):
        if not isinstance(n, Node):
            raise CudaTritonPreprocessError(f"delegate output {j} is {n!r}, not a tensor node")
        if n in out_index:
            raise CudaTritonPreprocessError(f"node '{n.name}' is delegate output {out_index[n]} and {j}")
        out_index[n] = j
    draft.num_outputs = len(outs)

    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if node.name in consts:
                continue
            if node in out_index:
                raise CudaTritonPreprocessError(f"delegate input '{node.name}' is also a delegate output")
            value_of[node] = len(draft.values)
            draft.values.append(_value_record("input", draft.num_inputs, node))
            draft.num_inputs += 1
        elif node.op == "output":
            continue
        elif is_pad_node(node):
            if not node.users or not all(is_conv_node(u) for u in node.users):
                raise CudaTritonPreprocessError(
                    f"{_describe(node)}: a pad in the delegate must feed only convolutions that fold it"
                )
            if node in out_index:
                raise CudaTritonPreprocessError(
                    f"{_describe(node)}: a folded pad cannot be a delegate output"
                )
        elif is_conv_node(node):
            fold = _draft_conv(node, ep, draft, value_of, out_index, tuning, jobs)
            if fold is not None:
                bn_folded.update((fold.bn, fold.output))
        elif node in bn_folded:
            continue  # computed by the convolution that folded it
        elif is_batch_norm_node(node):
            raise CudaTritonPreprocessError(
                f"{_describe(node)}: a batch norm in the delegate must follow a convolution that folds it"
            )
        else:
            raise CudaTritonPreprocessError(
                f"{_describe(node)} is in the delegated subgraph, but the delegate runs only convolutions "
                "(and the zero pads and inference batch norms it folds into them)"
            )
    for n in out_index:
        if n not in value_of:
            raise CudaTritonPreprocessError(f"delegate output '{n.name}' is not computed by a convolution")
    return draft


def _draft_conv(
    node: Node,
    ep: ExportedProgram,
    draft: _Draft,
    value_of: dict[Node, int],
    out_index: dict[Node, int],
    tuning: _Tuning,
    jobs: dict[str, CompileJob],
) -> BatchNormFold | None:
    """Add one convolution to the draft; returns the batch-norm fold it made (None when none)."""
    options = draft.options
    try:
        args: ConvArgs = bind_conv(node)
    except ValueError as e:
        raise CudaTritonPreprocessError(str(e)) from e
    params: ConvParams = args.params
    source = args.input
    if is_pad_node(source):
        fold, why = pad_fold(node, args, options.allow_tf32)
        if fold is None:
            raise CudaTritonPreprocessError(f"{_describe(node)}: its input pad cannot be folded: {why}")
        source, params = fold.source, fold.params
    if source not in value_of:
        raise CudaTritonPreprocessError(
            f"{_describe(node)}: its input '{source.name}' is neither a delegate input nor a convolution output"
        )
    consts = constant_names(ep)
    for what, n in (("weight", args.weight), ("bias", args.bias)):
        if n is not None and (n.op != "placeholder" or n.name not in consts):
            raise CudaTritonPreprocessError(
                f"{_describe(node)}: its {what} '{n.name}' is not a constant owned by the delegate (the "
                "partitioner tags weights with tag_constant_data)"
            )
    # A batch norm the partitioner put after this convolution: fold it (the conv then always has a bias).
    bn_fold, why = batch_norm_fold(node, args, consts)
    users = list(node.users)
    if bn_fold is None and len(users) == 1 and is_batch_norm_node(users[0]):
        raise CudaTritonPreprocessError(f"{_describe(node)}: the batch norm after it cannot be folded: {why}")
    result = node if bn_fold is None else bn_fold.output  # the node whose value this op writes

    x, w = tensor_val(source), tensor_val(args.weight)
    has_bias = args.bias is not None or bn_fold is not None
    problem = conv_problem(x, w, has_bias, params, options.allow_tf32)
    template, schedule, tuned = _choose(problem, tuning)
    draft.tuned_ops += tuned
    draft.templates[template.name] = draft.templates.get(template.name, 0) + 1

    weight, bias = conv_constants(ep, args, bn_fold)
    if tuple(weight.shape) != tuple(w.shape):
        raise CudaTritonPreprocessError(
            f"{_describe(node)}: weight shape {tuple(weight.shape)} != {tuple(w.shape)}"
        )
    prepared = template.prepare_weight(weight.detach(), problem, schedule)
    w_index = _add_constant(draft, prepared, f"weight of '{node.name}'")
    b_index = None
    if bias is not None:
        b_index = _add_constant(draft, bias, f"bias of '{node.name}'")

    if result in out_index:
        record = _value_record("output", out_index[result], result)
    else:
        record = _value_record("intermediate", 0, result)
    value_of[result] = len(draft.values)
    draft.values.append(record)
    in_value, out_value = value_of[source], value_of[result]

    op = OpRecord(
        stride=list(params.stride),
        padding_before=list(params.padding_before),
        padding_after=list(params.padding_after),
        dilation=list(params.dilation),
        transposed=params.transposed,
        output_padding=list(params.output_padding),
        groups=params.groups,
        input=in_value,
        weight=w_index,
        bias=b_index,
        output=out_value,
        weight_sizes=[int(s) for s in w.shape],
        weight_strides=[int(s) for s in w.stride()],
        template=template.name,
        schedule=schedule.key(),
    )
    # Scratch tensors (split-K partial sums, a channels-last input copy): intermediates the runtime allocates once.
    scratch_value: dict[str, int] = {}
    for t in template.scratch(problem, schedule):
        scratch_value[t.role] = len(draft.values)
        dtype = TRITON_PTR_DTYPE[t.dtype]  # the blob's dtype names are Triton's pointer types
        draft.values.append(
            ValueRecord("intermediate", 0, dtype, list(t.sizes), _contiguous_strides(t.sizes))
        )
    launches: list[_Launch] = []
    for li, launch in enumerate(template.launches(problem, schedule)):
        largs: list[Any] = []
        for a in launch.args:
            if isinstance(a, TensorArg):
                if a.role == "input":
                    largs.append(ValueRef(in_value))
                elif a.role == "output":
                    largs.append(ValueRef(out_value))
                elif a.role == "weight":
                    largs.append(ConstantRef(w_index))
                elif a.role == "bias":
                    largs.append(NullPtr() if b_index is None else ConstantRef(b_index))
                elif a.role in scratch_value:
                    largs.append(ValueRef(scratch_value[a.role]))
                else:
                    raise CudaTritonPreprocessError(f"{launch.name}: unknown tensor role {a.role!r}")
            elif isinstance(a, ScalarArg):
                largs.append(Scalar(a.type, a.value))
            else:
                raise CudaTritonPreprocessError(f"{launch.name}: unknown argument {a!r}")
        keys: dict[int, str] = {}
        for arch in options.archs:
            key = launch_key(template.name, problem, schedule, li, launch, arch)
            keys[arch] = key
            jobs.setdefault(key, CompileJob(template.name, problem, schedule, li, arch))
        launches.append(_Launch(launch, keys, largs))
    draft.ops.append(_Op(op, launches))
    return bn_fold


def _finish(
    draft: _Draft, kernels: dict[str, CompiledKernel], stats: PreprocessStats, cubins_seen: set[str]
) -> PreprocessResult:
    options = draft.options
    table: list[KernelRecord] = []
    index_of: dict[tuple[int, str, bytes], int] = {}
    ops: list[OpRecord] = []
    for op in draft.ops:
        for lw in op.launches:
            per_arch: dict[int, int] = {}
            for arch, key in lw.keys.items():
                ck = kernels[key]
                expected = abi_types(lw.launch)
                if tuple(ck.param_types) != tuple(expected):
                    raise CudaTritonPreprocessError(
                        f"{lw.launch.name} (sm_{arch}): compiled parameters {ck.param_types} differ from the "
                        f"launch's {expected}"
                    )
                dedup = (ck.arch, ck.name, ck.cubin)
                if dedup not in index_of:
                    index_of[dedup] = len(table)
                    table.append(KernelRecord.from_compiled(ck))
                per_arch[arch] = index_of[dedup]
            g = tuple(int(v) for v in lw.launch.grid)
            op.record.launches.append(LaunchRecord(per_arch, (g[0], g[1], g[2]), lw.args))
        ops.append(op.record)

    blob = DelegateBlob(
        triton_version=triton.__version__,
        archs=list(options.archs),
        num_inputs=draft.num_inputs,
        num_outputs=draft.num_outputs,
        values=draft.values,
        constants=draft.constants,
        kernels=table,
        ops=ops,
    )
    data = serialize(blob)

    store = NamedDataStore()
    for rec, payload in zip(draft.constants, draft.constant_data, strict=True):
        store.add_named_data(rec.key, payload, CONSTANT_ALIGNMENT, options.external_tag)
    for key, cubin in named_cubins(blob).items():
        store.add_named_data(key, cubin, CUBIN_ALIGNMENT, None)
        if key not in cubins_seen:
            cubins_seen.add(key)
            stats.cubins_unique += 1
            stats.cubin_bytes += len(cubin)

    stats.partitions += 1
    stats.ops += len(ops)
    stats.launches += sum(len(o.launches) for o in ops)
    stats.kernels_in_blobs += len(table)
    stats.blob_bytes += len(data)
    stats.constant_bytes += sum(len(d) for d in draft.constant_data)
    stats.tuned_ops += draft.tuned_ops
    for k, v in draft.templates.items():
        stats.templates[k] = stats.templates.get(k, 0) + v
    info = {
        "ops": len(ops),
        "kernels": len(table),
        "blob_bytes": len(data),
        "templates": dict(draft.templates),
    }
    return PreprocessResult(
        processed_bytes=data, data_store_output=store.get_named_data_store_output(), _delegate_info_meta=info
    )


def preprocess_programs(items: list[tuple[ExportedProgram, list[CompileSpec]]]) -> list[PreprocessResult]:
    """Preprocess several delegated programs together: their kernels compile in one pool, deduplicated."""
    t0 = time.perf_counter()
    jobs: dict[str, CompileJob] = {}
    # The drafts' tensor work (weight layouts, folds, TF32 rounding) is many small ops: torch's intra-op threads
    # only contend with the compile workers and other jobs for the cores (seconds lost on a loaded 2-core
    # machine), so this runs on one thread.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        drafts = [
            _draft_program(ep, CudaTritonOptions.from_compile_specs(specs), jobs) for ep, specs in items
        ]
    finally:
        torch.set_num_threads(threads)
    t1 = time.perf_counter()
    kernels = compile_all(jobs)
    t2 = time.perf_counter()
    stats = PreprocessStats(kernels_unique=len(jobs), compile_seconds=t2 - t1)
    cubins_seen: set[str] = set()
    results = [_finish(d, kernels, stats, cubins_seen) for d in drafts]
    stats.total_seconds = time.perf_counter() - t0
    STATS_HISTORY.append(stats)
    logger.info(
        "CudaTritonBackend: %d partitions, %d convolutions, %d distinct kernels compiled in %.1f s",
        stats.partitions, stats.ops, stats.kernels_unique, stats.compile_seconds,
    )  # fmt: skip
    return results


def named_data_of(lowered: Any) -> dict[str, bytes]:
    """key -> bytes of a `LoweredBackendModule`'s named data (in the .pte and under every external tag)."""
    out: dict[str, bytes] = {}
    nd = lowered.named_data_store_output
    if nd is None:
        return out
    entries = dict(nd.pte_data)
    for per_file in nd.external_data.values():
        entries.update(per_file)
    for key, entry in entries.items():
        buf = nd.buffers[entry.buffer_index]
        out[key] = bytes(buf.buffer) if hasattr(buf, "buffer") else bytes(buf)
    return out


def read_lowered(lowered: Any) -> DelegateBlob:
    """A lowered module's blob, read back with its cubins taken from its named data (as the runtime does)."""
    return deserialize(bytes(lowered.processed_bytes), named_data_of(lowered))


class CudaTritonBackend(BackendDetails):
    """Compiles delegated convolutions to cubins for every target arch and writes the delegate blob."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        return preprocess_programs([(edge_program, compile_specs)])[0]

    @classmethod
    def preprocess_multimethod(
        cls,
        edge_programs: dict[str, list[ExportedProgram]],
        compile_specs: dict[str, list[list[CompileSpec]]],
    ) -> dict[str, list[PreprocessResult]]:
        items: list[tuple[ExportedProgram, list[CompileSpec]]] = []
        where: list[tuple[str, int]] = []
        for method, programs in edge_programs.items():
            specs = compile_specs[method]
            if len(specs) != len(programs):
                raise CudaTritonPreprocessError(
                    f"method {method}: {len(programs)} partitions but {len(specs)} compile spec lists"
                )
            for i, (ep, s) in enumerate(zip(programs, specs, strict=True)):
                items.append((ep, s))
                where.append((method, i))
        results = preprocess_programs(items) if items else []
        out: dict[str, list[PreprocessResult]] = {m: [None] * len(p) for m, p in edge_programs.items()}  # type: ignore[misc]
        for (method, i), r in zip(where, results, strict=True):
            out[method][i] = r
        return out


__all__ = [
    "CompileJob",
    "CudaTritonBackend",
    "CudaTritonPreprocessError",
    "PreprocessStats",
    "compile_all",
    "last_stats",
    "named_data_of",
    "preprocess_programs",
    "read_lowered",
    "reset_stats",
]
