"""Whisper's greedy token selection on the GPU, so that decoder steps chain without read-backs.

Kernel: ``shaders/whisper_select.wgsl`` (one workgroup). A selection keeps its whole state in one
small u32 tensor (count, last timestamp, chosen tokens, their log-probabilities), so reading the
results of many steps back is one copy of a few hundred bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import wgpu

from sayso.engine.gpu.entry_points import WHISPER_SELECT
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.tensors import GpuTensor
from sayso.engine.ops import WhisperRules

HEADER = 2  # state words before the tokens: count, last chosen timestamp (whisper_select.wgsl)
STEPS_PER_READ = 2
"""Decoder steps per read-back of a selection on a real GPU (``WhisperOps.decode_steps_per_read``).

The decoder records the next batch while the GPU runs the last (``sample_greedy``), so a read's
round trip is hidden and what a batch size costs is the steps run after EOT, one batch. A batch is
replayed (``Ops.repeatable``), so a smaller one costs little Python; 2 was the fastest batch measured
(docs/PERFORMANCE.md: decoder steps per read-back). On a CPU adapter (lavapipe) a round trip is short beside a
step, so there a batch is one step."""


@dataclass(eq=False)
class GpuWhisperSelection:
    """A selection over one window (``WhisperOps.whisper_selection``).

    ``state``: u32 [HEADER + 2*capacity] laid out as whisper_select.wgsl says; ``ids``: u32 [1], the
    last choice; ``masks``: the rules' suppress and begin-suppress bit planes, shared by every
    selection with the same rules.
    """

    rules: WhisperRules
    capacity: int
    masks: wgpu.GPUBuffer
    state: GpuTensor
    ids: GpuTensor


def _words(rules: WhisperRules) -> int:
    """u32 words per mask plane."""
    return -(-rules.n_vocab // 32)


def mask_planes(rules: WhisperRules) -> np.ndarray:
    """u32 [2, ceil(n_vocab/32)]: bit j%32 of word j/32 is set for suppressed ids (plane 0) and for
    ids suppressed at the first step only (plane 1)."""
    bits = np.zeros((2, _words(rules) * 32), bool)
    bits[0, list(rules.suppress)] = True
    bits[1, list(rules.begin_suppress)] = True
    return np.packbits(bits, axis=1, bitorder="little").view("<u4")


class SelectOps(GpuOpsBase):
    """``whisper_selection``, ``whisper_select`` and ``read_whisper_selection`` of ``engine.ops.WhisperOps``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decode_steps_per_read = 1 if self.device.is_cpu else STEPS_PER_READ
        # Mask planes by rules: uploaded once per model and setting, never pooled.
        self._whisper_masks: dict[WhisperRules, wgpu.GPUBuffer] = {}

    def whisper_selection(self, rules: WhisperRules, capacity: int) -> GpuWhisperSelection:
        if capacity < 1:
            raise ValueError(f"a selection needs room for at least one token, got capacity {capacity}")
        masks = self._whisper_masks.get(rules)
        if masks is None:
            planes = mask_planes(rules)
            masks = self.device.buffer(planes.nbytes, label="whisper-select-masks")
            self.device.queue.write_buffer(masks, 0, planes)
            self._whisper_masks[rules] = masks
        state = self.ids(np.zeros(HEADER + 2 * capacity, np.uint32))
        return GpuWhisperSelection(rules, capacity, masks, state, self.empty((1,), np.uint32))

    def whisper_select(self, logits: GpuTensor, selection: GpuWhisperSelection) -> GpuTensor:
        """logits [1, n_vocab] -> the selection's ids [1]."""
        rules = selection.rules
        if logits.shape != (1, rules.n_vocab):
            raise ValueError(f"whisper_select takes logits [1, {rules.n_vocab}], got {logits.shape}")
        params = [rules.n_vocab, rules.eot, rules.timestamp_begin, int(rules.timestamps),
                  rules.max_initial_timestamp, selection.capacity, _words(rules)]
        self.run(WHISPER_SELECT, [logits, selection.masks, selection.state, selection.ids], params, (1, 1, 1),
                 WG=self.reduction_threads)
        return selection.ids

    def read_whisper_selection(self, selection: GpuWhisperSelection) -> tuple[np.ndarray, np.ndarray]:
        return self.read_whisper_selection_later(selection)()

    def read_whisper_selection_later(self, selection: GpuWhisperSelection):
        fetch = self.read_later(selection.state)

        def result() -> tuple[np.ndarray, np.ndarray]:
            state, capacity = fetch(), selection.capacity
            n = int(state[0])
            tokens = state[HEADER : HEADER + n]
            logprobs = state[HEADER + capacity : HEADER + capacity + n].view(np.float32).astype(np.float64)
            return tokens, logprobs

        return result
