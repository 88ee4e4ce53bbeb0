"""A transducer's greedy search on the GPU: the joint's hidden layer, the step's choice and an LSTM
cell update, each reading the search's position from its state tensor, so that a batch of steps
(``engine.conformer.search``) is recorded once and replayed, and the host reads back a few words per
batch instead of a joint's logits per step.

Kernels: ``shaders/transducer.wgsl`` (the state's layout is there and in ``Ops.transducer_state``).
"""

from __future__ import annotations

import numpy as np

from sayso.engine.gpu.entry_points import JOINT_HIDDEN, LSTM_CELL, TRANSDUCER_CHOOSE
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.recorder import grid
from sayso.engine.gpu.tensors import GpuTensor, GpuWeight
from sayso.engine.ops import JOINT_ACTIVATIONS, TRANSDUCER_HEADER

STEPS_PER_READ = 32
"""Search steps per read-back of the state on a real GPU (``Ops.search_steps_per_read``). A step is
about ten small dispatches; a batch of them is replayed without the model's Python, and the read of
one batch's state is under way while the next batch is recorded, so what a larger batch costs is
the steps recorded past the end of the search, which change nothing."""
THREADS = 256  # joint_hidden's and lstm_cell's workgroup size


class TransducerOps(GpuOpsBase):
    """``transducer_state``, ``joint_hidden``, ``transducer_choose`` and ``lstm_cell`` of ``engine.ops.Ops``."""

    searches_on_backend = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.search_steps_per_read = 4 if self.device.is_cpu else STEPS_PER_READ

    def transducer_state(self, capacity: int) -> GpuTensor:
        state = np.zeros((1, TRANSDUCER_HEADER + 4 * capacity), np.uint32)
        state[0, 3] = 1
        return self._upload(state)

    def joint_hidden(self, encoder: GpuTensor, prediction: GpuTensor, state: GpuTensor, activation: str) -> GpuTensor:
        frames, width = encoder.shape
        if prediction.shape != (1, width):
            raise ValueError(f"joint_hidden: a prediction {prediction.shape} doesn't fit encoder rows of {width}")
        out = self.empty((1, width))
        self.run(JOINT_HIDDEN, [encoder, prediction, state, out], [frames, width], grid(-(-width // THREADS)),
                 ACT=JOINT_ACTIVATIONS.index(activation))
        return out

    def transducer_choose(self, logits: GpuTensor, durations: GpuTensor | None, state: GpuTensor, ids: GpuTensor,
                          frames: int, n_tokens: int, max_symbols: int) -> None:
        n_durations = 0 if durations is None else durations.shape[0]
        if logits.shape != (1, n_tokens + n_durations):
            raise ValueError(f"transducer_choose: logits {logits.shape} for {n_tokens} tokens, {n_durations} durations")
        capacity = (state.shape[1] - TRANSDUCER_HEADER) // 4
        params = [frames, n_tokens, n_durations, max_symbols, capacity]
        buffers = [logits, durations if durations is not None else logits, state, ids]  # logits: read-only
        self.run(TRANSDUCER_CHOOSE, buffers, params, (1, 1, 1), WG=self._threads_for(n_tokens))

    def _threads_for(self, n_tokens: int) -> int:
        """choose's workgroup: about eight tokens a thread, from 64 threads up to what the device allows.
        A small vocabulary (GigaAM's 34 characters) gains nothing from more threads, each of which then
        has nothing to do but take part in the reduction's barriers."""
        wanted = 1 << max(6, (-(-n_tokens // 8) - 1).bit_length())
        return min(self.reduction_threads, wanted)

    def lstm_cell(self, gates: GpuTensor, state: GpuTensor, c: GpuTensor, h: GpuTensor,
                  input_gates: tuple[GpuWeight, GpuTensor] | None = None) -> None:
        hidden = h.shape[1]
        if gates.shape != (1, 4 * hidden) or c.shape != h.shape:
            raise ValueError(f"lstm_cell: gates {gates.shape}, c {c.shape} and h {h.shape} don't fit")
        if input_gates is None:  # the lookup's bindings unused: any read-only buffers fill them
            table, token, stride = gates, state, 0
        else:
            weight, token = input_gates
            if weight.kind != "F32" or weight.k != 4 * hidden:
                raise ValueError(f"lstm_cell: input gates {weight.name} ({weight.kind}, width {weight.k}) "
                                 f"for {hidden} cells: an F32 table of width {4 * hidden} is needed")
            table, stride = weight.data, weight.k_pad
        self.run(LSTM_CELL, [gates, state, c, h, table, token], [hidden, stride], grid(-(-hidden // THREADS)),
                 INPUT_GATES=input_gates is not None)
