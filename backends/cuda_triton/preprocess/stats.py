"""What the preprocess did, summed per `preprocess_programs` call (scripts/export_pte.py prints it)."""

from __future__ import annotations

from dataclasses import dataclass, field


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


__all__ = ["STATS_HISTORY", "PreprocessStats", "last_stats", "reset_stats"]
