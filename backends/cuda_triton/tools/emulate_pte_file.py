"""A saved .pte run on the CPU: its memory plan, its CPU kernels through their ATen counterparts, its delegate
calls through `cuda_triton.tools.emulate_blob.EmulatedDelegate` (the blob emulator; kernels in the Triton
interpreter), one per delegate for all executions, as a loaded program keeps its delegates.

Values live in memory-planned arenas at their planned offsets with their dim order, as in ExecuTorch, so a plan's
aliasing between tensors is reproduced (see `emulate_pte_file`).
"""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

from typing import Any  # noqa: E402

import torch  # noqa: E402

from cuda_triton.tools.emulate_blob import EmulatedDelegate  # noqa: E402

_ET_DTYPES = {
    5: torch.float16,
    6: torch.float32,
    7: torch.float64,
    15: torch.bfloat16,
    4: torch.int64,
    3: torch.int32,
    11: torch.bool,
}


def emulate_pte_file(
    path: str,
    inputs: list[torch.Tensor],
    data_files: tuple[str, ...] = (),
    executions: int = 1,
    set_inputs_each_time: bool = True,
) -> list[torch.Tensor]:
    """Run a saved .pte's first method: delegate calls emulated, CPU kernels with their ATen counterparts.

    Values live in memory-planned arenas (byte buffers) at their planned offsets with their dim order, as in
    ExecuTorch, so aliasing between planned tensors is reproduced: with ``set_inputs_each_time=False`` and
    several ``executions`` it shows what a runner that sets its inputs only once computes (the memory plan
    reuses a dead input's bytes for later tensors).
    """
    from executorch.exir._serialize._program import deserialize_pte_binary

    pf = deserialize_pte_binary(open(path, "rb").read())
    prog = pf.program
    plan = prog.execution_plan[0]
    named: dict[str, bytes] = {}
    nds = [pf.named_data] if pf.named_data is not None else []
    if data_files:
        raise NotImplementedError(f"external data files ({data_files}) are not supported by the emulator yet")
    for nd in nds:
        for key, entry in nd.pte_data.items():
            named[key] = bytes(nd.buffers[entry.buffer_index])
    arenas = [bytearray(max(int(n), 1)) for n in plan.non_const_buffer_sizes]
    values: list[Any] = []
    for v in plan.values:
        t = v.val
        name = type(t).__name__
        if name == "Tensor":
            dtype = _ET_DTYPES[int(t.scalar_type)]
            sizes = list(t.sizes)
            order = list(t.dim_order)
            strides = [0] * len(sizes)
            acc = 1
            for d in reversed(order):
                strides[d] = acc
                acc *= max(sizes[d], 1)
            ai = t.allocation_info
            if ai is None:  # a constant of the program (CPU ops' weights)
                if t.data_buffer_idx == 0:
                    values.append(None)
                    continue
                raw = bytes(prog.constant_buffer[t.data_buffer_idx].storage)
                const = (
                    torch.frombuffer(bytearray(raw), dtype=dtype)[: max(acc, 1)] if raw else torch.empty(0)
                )
                values.append(torch.as_strided(const, sizes, strides))
                continue
            off = ai.memory_offset_low + (ai.memory_offset_high << 32)
            base = torch.frombuffer(arenas[ai.memory_id], dtype=torch.uint8)
            elem = torch.empty((), dtype=dtype).element_size()
            nbytes = acc * elem
            flat = base[off : off + nbytes].view(dtype)
            values.append(torch.as_strided(flat, sizes, strides))
        elif name == "Int":
            values.append(int(t.int_val))
        elif name == "Double":
            values.append(float(t.double_val))
        elif name == "Bool":
            values.append(bool(t.bool_val))
        elif name == "IntList":
            values.append(("intlist", list(t.items)))
        elif name == "Null":
            values.append(None)
        else:
            values.append(("unsupported", t))
    delegates: dict[int, EmulatedDelegate] = {}  # initialised at their first call, kept across executions
    for run_index in range(executions):
        if run_index == 0 or set_inputs_each_time:
            for idx, x in zip(plan.inputs, inputs, strict=True):
                values[idx].copy_(x)
        _run_chain(prog, plan, values, named, delegates)
    return [values[i].clone() for i in plan.outputs]


def _run_chain(
    prog: Any, plan: Any, values: list[Any], named: dict[str, bytes], delegates: dict[int, EmulatedDelegate]
) -> None:
    for instr in plan.chains[0].instructions:
        ia = instr.instr_args
        kind = type(ia).__name__
        if kind == "DelegateCall":
            delegate = delegates.get(ia.delegate_index)
            if delegate is None:
                d = plan.delegates[ia.delegate_index]
                delegate = EmulatedDelegate(prog.backend_delegate_data[d.processed.index].data, named)
                delegates[ia.delegate_index] = delegate
            blob = delegate.blob
            ins = [values[a] for a in ia.args[: blob.num_inputs]]
            run = delegate.execute([x.clone() for x in ins])
            for a, o in zip(ia.args[blob.num_inputs :], run.outputs, strict=True):
                values[a].copy_(o)
        elif kind == "KernelCall":
            op = plan.operators[ia.op_index]
            name, overload = op.name.split("::"), op.overload
            packet = getattr(getattr(torch.ops, name[0]), name[1])
            fn = getattr(packet, overload)
            args = []
            for a in ia.args:
                v = values[a]
                if isinstance(v, tuple) and v[0] == "intlist":
                    v = [values[i] for i in v[1]]
                args.append(v)
            schema = fn._schema
            kw = {}
            pos = []
            for arg_schema, v in zip(schema.arguments, args[: len(schema.arguments)], strict=True):
                if arg_schema.kwarg_only:
                    kw[arg_schema.name] = v
                else:
                    pos.append(v)
            fn(*pos, **kw)
        elif kind in ("MoveCall", "FreeCall", "JumpFalseCall"):
            raise NotImplementedError(f"instruction {kind}")


__all__ = ["emulate_pte_file"]
