"""A transducer's greedy search on the GPU: the joint's hidden layer, the step's choice and an LSTM
cell update, each reading the search's position from its state tensor, so that a batch of steps
(``engine.conformer.search``) is recorded once and replayed, and the host reads back a few words per
batch instead of a joint's logits per step.

Kernels: ``shaders/transducer.wgsl`` (the state's layout is there and in ``Ops.transducer_state``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sayso.engine.gpu.entry_points import JOINT_HIDDEN, LSTM_CELL, SMALL_STEPS, TRANSDUCER_CHOOSE
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.recorder import grid
from sayso.engine.gpu.tensors import GpuTensor
from sayso.engine.ops import JOINT_ACTIVATIONS, TRANSDUCER_HEADER, SmallTransducerHead

STEPS_PER_READ = 32
"""Search steps per read-back of the state on a real GPU (``Ops.search_steps_per_read``). A step is
about ten small dispatches; a batch of them is replayed without the model's Python, and the read of
one batch's state is under way while the next batch is recorded, so what a larger batch costs is
the steps recorded past the end of the search, which change nothing."""
THREADS = 256  # joint_hidden's and lstm_cell's workgroup size
SMALL_HEAD_MAX = 512  # SMALL_MAX in transducer.wgsl: small_steps' widest layer
SMALL_THREADS = 256  # small_steps' workgroup


@dataclass(frozen=True)
class GpuSmallHead:
    """A ``SmallTransducerHead`` as small_steps reads it: every matrix k-major in one f32 buffer, at
    ``offsets`` (Wp, bp, Wo, bo, G, Wh, in floats; shaders/transducer.wgsl)."""

    weights: GpuTensor
    offsets: tuple[int, ...]
    hidden: int
    joint: int
    outputs: int


class TransducerOps(GpuOpsBase):
    """``transducer_state``, ``joint_hidden``, ``transducer_choose`` and ``lstm_cell`` of ``engine.ops.Ops``."""

    searches_on_backend = True
    small_head_max = SMALL_HEAD_MAX

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

    def lstm_cell(self, gates: GpuTensor, state: GpuTensor, c: GpuTensor, h: GpuTensor) -> None:
        hidden = h.shape[1]
        if gates.shape != (1, 4 * hidden) or c.shape != h.shape:
            raise ValueError(f"lstm_cell: gates {gates.shape}, c {c.shape} and h {h.shape} don't fit")
        self.run(LSTM_CELL, [gates, state, c, h], [hidden], grid(-(-hidden // THREADS)))

    def small_transducer_head(self, head: SmallTransducerHead) -> GpuSmallHead:
        hidden, joint, outputs = head.widths
        if max(hidden, joint, outputs) > SMALL_HEAD_MAX:
            raise ValueError(f"a head of widths {head.widths} is wider than small_steps takes ({SMALL_HEAD_MAX})")
        # k-major: the threads of a product, one output row each, read consecutive words.
        parts = [head.joint_pred.T, head.joint_pred_bias, head.joint_out.T, head.joint_out_bias, head.input_gates,
                 head.recurrent.T]
        flat = [np.ascontiguousarray(part, np.float32).reshape(-1) for part in parts]
        offsets = tuple(int(at) for at in np.cumsum([0] + [part.size for part in flat[:-1]]))
        return GpuSmallHead(self.tensor(np.concatenate(flat)[None, :]), offsets, hidden, joint, outputs)

    def transducer_small_steps(self, projected: GpuTensor, head: GpuSmallHead, durations: GpuTensor | None,
                               state: GpuTensor, c: GpuTensor, h: GpuTensor, frames: int, n_tokens: int,
                               max_symbols: int, steps: int, activation: str) -> None:
        if durations is not None:
            raise ValueError("transducer_small_steps runs RNN-T heads: a TDT head's durations are not taken")
        if (projected.shape[1] != head.joint or n_tokens != head.outputs or c.shape != (1, head.hidden)
                or h.shape != c.shape):
            widths = (head.hidden, head.joint, head.outputs)
            raise ValueError(f"transducer_small_steps: encoder rows of {projected.shape[1]}, {n_tokens} tokens "
                             f"and a cell {c.shape} don't fit a head of widths {widths}")
        capacity = (state.shape[1] - TRANSDUCER_HEADER) // 4
        params = [frames, n_tokens, max_symbols, capacity, head.hidden, head.joint, steps, *head.offsets]
        self.run(SMALL_STEPS, [projected, head.weights, state, c, h], params, (1, 1, 1),
                 ACT=JOINT_ACTIVATIONS.index(activation), WG=SMALL_THREADS)
