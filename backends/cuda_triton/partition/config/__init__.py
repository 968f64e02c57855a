"""The partition configs, one per op family, and the table the partitioner looks them up in.

`ALL_CONFIGS` lists every family's config. The partitioner uses those whose family the preprocess can draft
into the blob (`cuda_triton.preprocess.families.DRAFTED_FAMILIES`), so it never delegates an op the export could
not lower; a test may pass any set.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch.fx import Node

from ...conv.binding import aten_overload
from .base import OpConfig, PartitionContext, Verdict
from .conv import ConvConfig
from .data_movement import DataMovementConfig
from .elementwise import ElementwiseConfig
from .gemm import GemmConfig
from .norm import NormConfig
from .pooling import PoolingConfig
from .reduction import ReductionConfig

ALL_CONFIGS: tuple[type[OpConfig], ...] = (
    ConvConfig,
    ElementwiseConfig,
    PoolingConfig,
    ReductionConfig,
    GemmConfig,
    NormConfig,
    DataMovementConfig,
)


class ConfigTable:
    """The configs by the ATen overload of the edge ops they take (each overload has one family)."""

    def __init__(self, configs: Iterable[OpConfig]) -> None:
        self.configs = list(configs)
        self.by_target: dict[object, OpConfig] = {}
        for config in self.configs:
            for target in config.targets:
                other = self.by_target.get(target)
                if other is not None:
                    raise ValueError(f"{target} is claimed by the {other.family} and {config.family} configs")
                self.by_target[target] = config

    def config_for(self, node: Node) -> OpConfig | None:
        if node.op != "call_function":
            return None
        return self.by_target.get(aten_overload(node.target))

    def family(self, name: str) -> OpConfig | None:
        return next((c for c in self.configs if c.family == name), None)

    @property
    def preserved(self) -> list[object]:
        return [op for c in self.configs for op in c.preserved]


def configs_for(families: Iterable[str]) -> list[OpConfig]:
    """One config instance for each named family (in `ALL_CONFIGS` order)."""
    wanted = set(families)
    unknown = wanted - {c.family for c in ALL_CONFIGS}
    if unknown:
        raise ValueError(f"unknown op families {sorted(unknown)}; known: {[c.family for c in ALL_CONFIGS]}")
    return [c() for c in ALL_CONFIGS if c.family in wanted]


__all__ = [
    "ALL_CONFIGS",
    "ConfigTable",
    "ConvConfig",
    "DataMovementConfig",
    "ElementwiseConfig",
    "GemmConfig",
    "NormConfig",
    "OpConfig",
    "PartitionContext",
    "PoolingConfig",
    "ReductionConfig",
    "Verdict",
    "configs_for",
]
