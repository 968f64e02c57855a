"""The delegate blob (docs/blob_format.md): records, the writer `serialize`, the Python reader `deserialize`, the
arena planner `plan_arena`. Torch-free."""

from .arena import plan_arena
from .blob import DelegateBlob, deserialize, named_cubins, serialize
from .encoding import DTYPES, ELEMENT_SIZE, FORMAT_VERSION, MAX_NAME, BlobError
from .records import *  # noqa: F403  (every record kind and its parts)
from .records import __all__ as _records_all
from .sections import ConstantRecord, KernelRecord, ValueRecord, cubin_named_key

__all__ = [
    "DTYPES",
    "ELEMENT_SIZE",
    "FORMAT_VERSION",
    "MAX_NAME",
    "BlobError",
    "ConstantRecord",
    "DelegateBlob",
    "KernelRecord",
    "ValueRecord",
    "cubin_named_key",
    "deserialize",
    "named_cubins",
    "plan_arena",
    "serialize",
    *_records_all,
]
