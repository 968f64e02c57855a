"""`CudaTritonOptions`: the typed face of the delegate's compile specs.

ExecuTorch hands a backend nothing but ``list[CompileSpec]`` (key: str, value: bytes). This module is the one
place that spells those keys and their encodings, in both directions:

========================= ================================ ==========================================================
key                       value (UTF-8 bytes)              meaning
========================= ================================ ==========================================================
``archs``                 ``"80,90"``                      SM architectures to compile every kernel for (8.x -> 80,
                                                           9.0 -> 90, an sm_90a cubin)
``strict``                ``"0"`` / ``"1"``                fail the export when an op family of the delegate declines
                                                           one of its ops (default 1); 0 leaves such ops on the CPU
``allow_tf32``            ``"0"`` / ``"1"``                fp32 convolutions may use TF32 tensor cores
``tf32_on_fp16``          ``"0"`` / ``"1"``                ... and may run them at TF32 precision on fp16 tensor
                                                           cores, scaled by powers of two (F16_MMA schedules)
``fold_batch_norm``       ``"0"`` / ``"1"``                fold an inference batch norm after a delegated forward
                                                           convolution into its weight and bias
``channels_last``         ``"0"`` / ``"1"``                plan the intermediates of 2-D/3-D convolutions
                                                           channels-last (default 1); 0 keeps the recorded layouts
``fuse_epilogues``        ``"0"`` / ``"1"``                run an elementwise chain after a convolution or a GEMM
                                                           in its epilogue where its kernel takes one (default 1)
``fuse_prologues``        ``"0"`` / ``"1"``                run an elementwise chain that only a convolution reads in
                                                           the convolution's input loads where its kernel takes one
                                                           (default 1)
``fold_layer_norms``      ``"0"`` / ``"1"``                fold a layer norm that only a GEMM reads into the GEMM
                                                           (default 0)
``programmatic_launch``   ``"0"`` / ``"1"``                sm_90 kernels are built and launched for programmatic
                                                           dependent launch (default 0)
``tuning_table``          a file path, or empty            tuning table to consult before the shipped one
``external_tag``          a tag, or empty                  store weights in ``<tag>.ptd`` instead of the .pte
``target_device``         ``"cuda:0"`` (absent = host)     ExecuTorch device memory planning: delegate I/O planned in
                                                           device memory, with H2D/D2H copies inserted around it
========================= ================================ ==========================================================

``target_device`` is ExecuTorch's own key (``exir.passes.propagate_device_pass``); the others are ours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from executorch.exir.backend.compile_spec_schema import CompileSpec

KEY_ARCHS = "archs"
KEY_STRICT = "strict"
KEY_TF32 = "allow_tf32"
KEY_TF32_ON_FP16 = "tf32_on_fp16"
KEY_FOLD_BN = "fold_batch_norm"
KEY_CHANNELS_LAST = "channels_last"
KEY_FUSE_EPILOGUES = "fuse_epilogues"
KEY_FUSE_PROLOGUES = "fuse_prologues"
KEY_FOLD_LAYER_NORMS = "fold_layer_norms"
KEY_PROGRAMMATIC_LAUNCH = "programmatic_launch"
KEY_TUNING = "tuning_table"
KEY_EXTERNAL = "external_tag"
KEY_TARGET_DEVICE = "target_device"  # exir.passes.propagate_device_pass.TARGET_DEVICE_COMPILE_SPEC_KEY
# The on/off options: compile-spec key -> the field it sets (b"1" / b"0"), in the order the specs list them.
FLAG_KEYS = {
    KEY_STRICT: "strict",
    KEY_TF32: "allow_tf32",
    KEY_TF32_ON_FP16: "tf32_on_fp16",
    KEY_FOLD_BN: "fold_batch_norm",
    KEY_CHANNELS_LAST: "channels_last",
    KEY_FUSE_EPILOGUES: "fuse_epilogues",
    KEY_FUSE_PROLOGUES: "fuse_prologues",
    KEY_FOLD_LAYER_NORMS: "fold_layer_norms",
    KEY_PROGRAMMATIC_LAUNCH: "programmatic_launch",
}
# The optional text options (listed only when set; an empty value decodes to None).
TEXT_KEYS = {KEY_TUNING: "tuning_table", KEY_EXTERNAL: "external_tag", KEY_TARGET_DEVICE: "target_device"}

SUPPORTED_ARCHS: tuple[int, ...] = (80, 90)
DEFAULT_ARCHS: tuple[int, ...] = (80, 90)


def _bool(value: bytes, key: str) -> bool:
    text = value.decode().strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"compile spec {key!r}: expected 0 or 1, got {text!r}")


def parse_archs(text: str | Iterable[int | str]) -> tuple[int, ...]:
    """``"80,90"``, ``"sm_80 sm_90a"`` or ``[80, 90]`` -> ``(80, 90)`` (sorted, unique, validated)."""
    items: Iterable[Any] = text.replace(",", " ").split() if isinstance(text, str) else text
    out: set[int] = set()
    for item in items:
        s = str(item).strip().lower().removeprefix("sm_").removeprefix("sm").rstrip("a")
        if not s:
            continue
        try:
            arch = int(s)
        except ValueError as e:
            raise ValueError(f"target arch {item!r} is not a number like 80 or 90") from e
        if arch not in SUPPORTED_ARCHS:
            raise ValueError(
                f"target arch {arch} is not supported; choose from {list(SUPPORTED_ARCHS)} "
                "(80 covers every 8.x GPU through its sm_80 cubin, 90 is an sm_90a cubin for 9.0)"
            )
        out.add(arch)
    if not out:
        raise ValueError("at least one target arch is needed")
    return tuple(sorted(out))


@dataclass(frozen=True)
class CudaTritonOptions:
    """Options of the CUDA Triton delegate; `compile_specs()` encodes them, `from_compile_specs` decodes.

    Args:
        archs: SM architectures every kernel is compiled for (default sm_80 and sm_90a).
        strict: fail the export when an op family of the delegate declines one of its ops (a convolution with a
            computed weight, an unsupported dtype, ...), naming each and why; off leaves such ops on the CPU
            with the reason in the partition report. Ops that no family takes stay on the CPU either way.
        allow_tf32: fp32 convolutions may use TF32 tensor cores (PyTorch's cuDNN default is on).
        tf32_on_fp16: with allow_tf32, compute-heavy fp32 convolutions may run on fp16 tensor cores at TF32's
            precision, each operand scaled by a power of two (``conv/templates/_f16_mma.py``); off keeps
            TF32 tensor cores, TF32's range included.
        fold_batch_norm: an eval-mode batch norm right after a delegated forward convolution joins the
            partition and is folded into the convolution's weight and bias (no CPU op between delegates).
        channels_last: the tensors a 2-D or 3-D convolution writes inside the delegate, and what the ops after
            it compute from them, are stored channels-last (the layout the convolution kernels read and write
            fastest, and the one that makes a 1x1 convolution a plain GEMM); the delegate's outputs keep the
            layouts the program records. Off: every intermediate takes the layout the graph records.
        fuse_epilogues: an elementwise chain (activation, residual add, per-channel or per-(N, C) multiply) whose
            only input from a convolution or a GEMM (addmm, mm, bmm, linear) is that op's result runs in the op's
            epilogue, where the chosen kernel takes one (``conv/epilogue.py``, docs/gemm.md); off: every chain is
            a kernel of its own.
        fuse_prologues: an elementwise chain that only a convolution reads, computed from one feature map and
            per-(N, C) operands (squeeze-excitation's ``x * sigmoid(s)`` before the next 1x1 convolution), runs
            as the convolution loads its input, where the chosen kernel takes one (``conv/epilogue.py``); off:
            such a chain is a kernel of its own.
        fold_layer_norms: a layer norm over the last dim whose result only the first matrix of a GEMM reads
            (ConvNeXt's blocks, pre-norm MLPs) is folded into that GEMM: its weight and bias into the GEMM's,
            its row statistics computed by the GEMM kernel (``preprocess/gemm_norm.py``, docs/gemm.md); off:
            the norm is a kernel of its own. Off by default until the GPU shows it pays (docs/gemm.md).
        programmatic_launch: the sm_90 kernels are compiled and launched for programmatic dependent launch
            (``kernel/pdl.py``): each may be scheduled while the kernel before it finishes, and waits for it
            before touching memory. Off by default until GPU measurements show it pays.
        tuning_table: a tuning table (JSON) consulted before the shipped one.
        external_tag: when set, weights are written to ``<external_tag>.ptd`` beside the .pte.
        target_device: e.g. ``"cuda:0"``: ExecuTorch plans the delegate's inputs and outputs in device memory
            (the program then needs the runtime's CUDA DeviceAllocator). None keeps them in host memory.
    """

    archs: tuple[int, ...] = DEFAULT_ARCHS
    strict: bool = True
    allow_tf32: bool = True
    tf32_on_fp16: bool = True
    fold_batch_norm: bool = True
    channels_last: bool = True
    fuse_epilogues: bool = True
    fuse_prologues: bool = True
    fold_layer_norms: bool = False
    programmatic_launch: bool = False
    tuning_table: str | None = None
    external_tag: str | None = None
    target_device: str | None = None
    extra: tuple[tuple[str, bytes], ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "archs", parse_archs(self.archs))
        if self.target_device is not None:
            dev = self.target_device.strip().lower()
            kind, _, index = dev.partition(":")
            if kind != "cuda" or (index and not index.isdigit()):
                raise ValueError(
                    f"target_device must look like 'cuda' or 'cuda:N', got {self.target_device!r}"
                )
            object.__setattr__(self, "target_device", dev if index else "cuda:0")
        if self.external_tag is not None and not self.external_tag.strip():
            object.__setattr__(self, "external_tag", None)

    def compile_specs(self) -> list[CompileSpec]:
        specs = [
            CompileSpec(KEY_ARCHS, ",".join(map(str, self.archs)).encode()),
            *(CompileSpec(key, b"1" if getattr(self, name) else b"0") for key, name in FLAG_KEYS.items()),
        ]
        for key, name in TEXT_KEYS.items():
            if getattr(self, name):
                specs.append(CompileSpec(key, str(getattr(self, name)).encode()))
        specs.extend(CompileSpec(k, v) for k, v in self.extra)
        return specs

    @staticmethod
    def from_compile_specs(specs: Sequence[CompileSpec]) -> CudaTritonOptions:
        """Decode; keys we do not know are kept in ``extra`` (other tools may add their own)."""
        kw: dict[str, Any] = {}
        extra: list[tuple[str, bytes]] = []
        for spec in specs:
            key, value = spec.key, bytes(spec.value)
            if key == KEY_ARCHS:
                kw["archs"] = parse_archs(value.decode())
            elif key in FLAG_KEYS:
                kw[FLAG_KEYS[key]] = _bool(value, key)
            elif key in TEXT_KEYS:
                kw[TEXT_KEYS[key]] = value.decode() or None
            else:
                extra.append((key, value))
        return CudaTritonOptions(**kw, extra=tuple(extra))


__all__ = ["CudaTritonOptions", "DEFAULT_ARCHS", "SUPPORTED_ARCHS", "parse_archs"]
