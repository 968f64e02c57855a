"""Op record kinds, one module each (docs/blob_format.md, "OPS_"). Adding an op family is adding a module here
(a dataclass subclassing `OpRecord`: its KIND, fields, ``params`` encoding and shape-rule check) and importing it
here, which puts it in `RECORD_KINDS`, plus its C++ twin in runtime/blob/records/."""

from __future__ import annotations

from .base import (
    Arg,
    ConstantRef,
    FromInput,
    FromResult,
    FromStep,
    LaunchRecord,
    Literal,
    NullPtr,
    Operand,
    OpRecord,
    Scalar,
    Step,
    StepArg,
    ValueRef,
    classes_by_code,
)
from .context import RecordContext
from .conv import ConvRecord
from .data_movement import (
    CatRecord,
    CopyRecord,
    DataMovementRecord,
    PadRecord,
    PermuteRecord,
    ReshapeRecord,
    SliceRecord,
    SplitRecord,
    UpsampleRecord,
)
from .elementwise import ElementwiseRecord
from .gemm import GemmRecord
from .norm import NormRecord
from .pooling import PoolingRecord
from .reduction import ReductionRecord

# Every kind defined above by its KIND (each module's record classes, imported here, define them).
RECORD_KINDS: dict[int, type[OpRecord]] = classes_by_code(OpRecord, "KIND")

__all__ = [
    "RECORD_KINDS",
    "Arg",
    "CatRecord",
    "ConstantRef",
    "ConvRecord",
    "CopyRecord",
    "DataMovementRecord",
    "ElementwiseRecord",
    "FromInput",
    "FromResult",
    "FromStep",
    "GemmRecord",
    "LaunchRecord",
    "Literal",
    "NormRecord",
    "NullPtr",
    "OpRecord",
    "Operand",
    "PadRecord",
    "PermuteRecord",
    "PoolingRecord",
    "RecordContext",
    "ReductionRecord",
    "ReshapeRecord",
    "Scalar",
    "SliceRecord",
    "SplitRecord",
    "Step",
    "StepArg",
    "UpsampleRecord",
    "ValueRef",
]
