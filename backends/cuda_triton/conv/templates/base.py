"""The template protocol: what every convolution kernel family declares.

A template turns a `ConvProblem` and one `Schedule` (a point of its tuning space) into a list of
`KernelLaunch`es (the family-independent launch protocol, `cuda_triton.kernel.launch`), naming the
convolution's tensors by the roles below.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch

from ...kernel.launch import KernelLaunch, Schedule, ScratchTensor, Support, allocate_scratch
from ..problem import ConvProblem
from .epilogue_args import EPILOGUE_ROLES, PROLOGUE_ROLES

# Tensor roles a convolution's launches can reference (`TensorArg.role`). "weight" is the *prepared* weight
# (`ConvTemplate.prepare_weight`). "workspace", "tile_counters", "input_cl", "input_pad", "amax" and "input_f16" are
# scratch tensors (`ConvTemplate.scratch`): split-K partial sums and tile counters (_splitk.py), a channels-last
# copy of a contiguous input, a zero-padded channels-last copy of any input, the input's partial maxima and its
# scaled fp16 copy (_f16_mma.py). The op's CUDA body allocates them per call; the delegate blob records them as
# intermediate values the C++ runtime allocates once at init (the zeroed tile counters as state values). "epilogue1".."epilogue3" are the operands of a fused epilogue, "prologue1".."prologue3"
# those of a fused prologue (epilogue_args.py).
TENSOR_ROLES = (
    "input",
    "weight",
    "bias",
    "output",
    "workspace",
    "tile_counters",
    "input_cl",
    "input_pad",
    "amax",
    "input_f16",
    *EPILOGUE_ROLES,
    *PROLOGUE_ROLES,
)
SCRATCH_ROLES = ("workspace", "tile_counters", "input_cl", "input_pad", "amax", "input_f16")


@dataclass
class ConvTemplate(ABC):
    """A kernel family. Subclasses are stateless; the registry holds one instance each."""

    name: str = field(default="", init=False)

    @abstractmethod
    def supports(self, problem: ConvProblem) -> Support:
        """Whether this family computes ``problem`` exactly (dims, layouts, dtypes, index ranges)."""

    def worth_routing(self, problem: ConvProblem) -> bool:
        """Whether routing ``problem`` here is expected to beat the platform's own convolution. The default,
        which every family keeps, is yes wherever it is exact (transposed convs, for one, Inductor cannot compile
        at all)."""
        return bool(self.supports(problem))

    def heuristic_claims(self, problem: ConvProblem) -> bool:
        """Whether, with no tuning-table entry, ``problem`` (which this template supports: callers ask only
        supporting templates, `heuristic_template`) should run here even though a template earlier in the priority
        order supports it too. Only where measurements say this template's heuristic schedule beats theirs; no
        family claims anything by default."""
        return False

    @abstractmethod
    def schedules(self, problem: ConvProblem) -> list[Schedule]:
        """The tuning space for ``problem``: every schedule here must run it correctly."""

    @abstractmethod
    def heuristic_schedule(self, problem: ConvProblem) -> Schedule:
        """The schedule to use when no tuning table has ``problem``; one of `schedules(problem)`."""

    def takes_epilogue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        """Whether the launches for ``schedule`` apply a fused elementwise chain (``problem.epilogue``,
        conv/epilogue.py) before storing the output. Default: no (the chain then runs as its own kernel)."""
        return False

    def takes_prologue(self, problem: ConvProblem, schedule: Schedule) -> bool:
        """Whether the launches for ``schedule`` apply a fused elementwise chain to the input as they load it
        (``problem.prologue``, conv/epilogue.py). Default: no (the chain then runs as its own kernel)."""
        return False

    def transfers_to(self, schedule: Schedule, problem: ConvProblem) -> bool:
        """Whether ``schedule``, tuned on a neighbouring convolution, may run ``problem`` (the tuning table's
        nearest-signature fallback; it already checks that `schedules(problem)` offers it). Default: yes."""
        return True

    def half_sum_length(self, problem: ConvProblem, schedule: Schedule) -> int:
        """The most products the launches sum in the 16-bit input type before widening to fp32 (0: every sum in
        fp32, the default). Part of the numerics contract: a chain of n such additions may be off by up to
        n unit roundoffs of the type times the sum of |x||w| it covers, which the GPU checks allow for."""
        return 0

    def prepare_weight(self, weight: torch.Tensor, problem: ConvProblem, schedule: Schedule) -> torch.Tensor:
        """The weight laid out the way the kernels read it, as a contiguous tensor of any shape.

        Done once at export (the C++ runtime uploads these bytes as they are) and cached by the op's CUDA body.
        Default: the weight made contiguous in its ATen shape.
        """
        return weight.contiguous()

    def scratch(self, problem: ConvProblem, schedule: Schedule) -> list[ScratchTensor]:
        """The scratch tensors the launches use (default: none).

        Static like the grid: a function of the problem's shapes and the schedule only. Launches must not
        expect them zeroed (the runtime hands over whatever memory it allocated) and must not keep anything in
        them from one call to the next, except in a ``zeroed`` one (`ScratchTensor.zeroed`), which they find all
        zero and leave all zero.
        """
        return []

    def allocate_scratch(
        self, problem: ConvProblem, schedule: Schedule, device: torch.device | str
    ) -> dict[str, torch.Tensor]:
        """Fresh scratch tensors for one call, by role (the ``zeroed`` ones zero-filled)."""
        return allocate_scratch(self.scratch(problem, schedule), device)

    @abstractmethod
    def launches(self, problem: ConvProblem, schedule: Schedule) -> list[KernelLaunch]:
        """The kernel calls that compute ``problem`` with ``schedule``, in order, on one stream.

        The output tensor is allocated with the layout rule (`problem.output_stride`) before the first launch;
        launches must write every output element (bias or zero where no tap lands).
        """
