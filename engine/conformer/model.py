"""What a Conformer model does once loaded, the same for every family: subsampling, the blocks, a head.

A family's model (``ParakeetModel``, ``GigaamModel``) loads ``ops``, ``subsampling``, ``blocks`` and
``head`` in its constructor and inherits ``encode`` and ``decode``.
"""

from __future__ import annotations

import numpy as np

from sayso.engine.conformer.block import ConformerBlock
from sayso.engine.conformer.emission import Emission
from sayso.engine.conformer.heads import CtcHead, TransducerHead
from sayso.engine.conformer.search import BackendTransducerHead
from sayso.engine.layers import in_submissions
from sayso.engine.ops import Ops, Tensor


class ConformerModel:
    """Weights on a backend; ``encode`` maps log-mel [n_mels, T] to encoder states [T', d], ``decode``
    the states to emissions."""

    ops: Ops
    subsampling: object  # callable (ops, mel [n_mels, T]) -> Tensor [T', d]
    blocks: list[ConformerBlock]
    head: TransducerHead | BackendTransducerHead | CtcHead

    def encode(self, mel: np.ndarray) -> Tensor:
        """mel: float32 [n_mels, T] -> encoder states [T', d_model] on the backend (T' by the subsampling)."""
        x = self.subsampling(self.ops, mel)
        for block in in_submissions(self.ops, self.blocks):
            x = block(self.ops, x)
        return x

    def decode(self, encoded: Tensor) -> list[Emission]:
        return self.head.decode(self.ops, encoded)
