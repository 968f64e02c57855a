"""What one `CudaTritonPartitioner.partition` call did: a verdict per op, the convolutions' details, partitions."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ConvDecision:
    """The partitioner's verdict on one convolution node (the planner's decision and the folds it made)."""

    node: str
    target: str
    decision: str  # ROUTED / REQUIRED / DECLINED / REFUSED
    delegated: bool
    reason: str
    template: str | None = None
    module: str | None = None
    folded_pad: str | None = None  # name of the constant_pad_nd folded into this conv
    pad_note: str = ""  # why an input pad was not folded
    folded_batch_norm: str | None = None  # name of the batch norm folded into this conv
    bn_note: str = ""  # why the batch norm after it was not folded
    tag: str | None = None


@dataclass
class OpDecision:
    """The verdict on one op node of the edge program: which family took it, or why it stays on the CPU."""

    node: str
    target: str
    family: str | None  # None: no op family of the delegate takes this target
    delegated: bool
    reason: str
    module: str | None = None
    tag: str | None = None

    @property
    def declined(self) -> bool:
        """A family takes this op but not this node (dtype, shape, layout, ...): what strict mode fails on."""
        return self.family is not None and not self.delegated


@dataclass
class PartitionReport:
    """Every op's verdict (`ops`), each convolution's details (`decisions`) and the partitions formed."""

    decisions: list[ConvDecision] = field(default_factory=list)
    ops: list[OpDecision] = field(default_factory=list)
    partitions: dict[str, list[str]] = field(default_factory=dict)  # tag -> node names

    @property
    def num_convs(self) -> int:
        return len(self.decisions)

    @property
    def num_delegated(self) -> int:
        return sum(d.delegated for d in self.decisions)

    @property
    def left_on_cpu(self) -> list[ConvDecision]:
        return [d for d in self.decisions if not d.delegated]

    @property
    def ops_on_cpu(self) -> list[OpDecision]:
        return [d for d in self.ops if not d.delegated]

    @property
    def declined(self) -> list[OpDecision]:
        return [d for d in self.ops if d.declined]

    def counts(self) -> dict[str, int]:
        """Convolutions per outcome: ROUTED/REQUIRED/DECLINED (delegated or not), REFUSED, KEPT (taken by the
        planner, left out by the partitioner)."""
        out: dict[str, int] = {}
        for d in self.decisions:
            key = d.decision if d.delegated or d.decision == "REFUSED" else "KEPT"
            out[key] = out.get(key, 0) + 1
        return out

    def family_counts(self) -> dict[str, int]:
        """Delegated ops per family."""
        return dict(Counter(d.family for d in self.ops if d.delegated and d.family))

    def cpu_counts(self) -> dict[str, int]:
        """Ops left on the CPU per edge op."""
        return dict(Counter(d.target for d in self.ops_on_cpu))

    def summary(self) -> str:
        c = self.counts()
        parts = ", ".join(f"{k.lower()} {v}" for k, v in sorted(c.items()))
        pads = sum(d.folded_pad is not None for d in self.decisions)
        bns = sum(d.folded_batch_norm is not None for d in self.decisions)
        conv = (
            f"{self.num_delegated}/{self.num_convs} convolutions delegated in {len(self.partitions)} partition(s)"
            f" ({parts}{f', {pads} pads folded' if pads else ''}"
            f"{f', {bns} batch norms folded' if bns else ''})"
        )
        families = ", ".join(f"{k} {v}" for k, v in sorted(self.family_counts().items()))
        delegated = sum(d.delegated for d in self.ops)
        ops = f"{delegated}/{len(self.ops)} ops delegated" + (f" ({families})" if families else "")
        cpu = self.cpu_counts()
        if cpu:
            ops += "; on the CPU: " + ", ".join(
                f"{t} x{n}" for t, n in sorted(cpu.items(), key=lambda x: -x[1])
            )
        return f"{conv}\n{ops}"

    def format(self, verbose: bool = False) -> str:
        lines = [self.summary()]
        for d in self.decisions:
            if d.delegated and not verbose:
                continue
            where = f" [{d.module}]" if d.module else ""
            status = f"-> {d.tag}" if d.delegated else "stays on CPU"
            folded = [n for n in (d.folded_pad, d.folded_batch_norm) if n]
            extra = f" (folds {', '.join(folded)})" if folded else ""
            lines.append(f"  {d.node:<24} {d.decision:<9} {status}{extra}{where}: {d.reason}")
        why: Counter[tuple[str, str]] = Counter(
            (d.target, d.reason) for d in self.ops_on_cpu if d.family != "conv"
        )
        if why:
            lines.append("ops left on the CPU (op, count, why):")
            lines += [f"  {target} x{n}: {reason}" for (target, reason), n in sorted(why.items())]
        if verbose:
            lines += [
                f"  {d.node:<24} {d.family or '-':<14} -> {d.tag}"
                for d in self.ops
                if d.delegated and d.family != "conv"
            ]
        return "\n".join(lines)


__all__ = ["ConvDecision", "OpDecision", "PartitionReport"]
