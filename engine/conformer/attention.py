"""The two self-attentions of the Conformer families, on ``engine.ops``.

* ``RelPositionAttention`` (Parakeet, NeMo's ``RelPositionMultiHeadAttention``): Transformer-XL
  relative positions. The score of query i and key j, per head, is
  ``((q_i + u)·k_j + (q_i + v)·p_{i-j}) / sqrt(dh)`` with ``p = linear_pos(sinusoid table)`` and
  learned biases u, v (``pos_bias_u``/``pos_bias_v``).
* ``RotaryAttention`` (GigaAM): rotary positions applied to the layer input *before* the query and
  key projections (the value projection sees the unrotated input), base ``pos_emb_max_len``.

How the relative-position term is computed: the position projections ``P = linear_pos(sinusoids)``
[2L-1, d] depend only on the sequence length, not on the audio, so each layer makes them on the backend
for the longest length L it has seen (rounded up to ``SPAN_STEP`` frames) and keeps them: a shorter
sequence reads the middle rows. The query projection's bias includes u, so the position term
``(q_i + u)·P_h + (v - u)·P_h`` is the projected query against P plus a bias that does not depend on
the audio, made from P with the rest of the tables: P times a block-diagonal [H, d] weight holding each
head's ``(v - u)_h``, so ``Wpos`` is never dequantized on the host. One
``relative_attention`` over all heads takes that term inside its walk over the keys, so no
[H, T, 2T-1] table of position scores is ever held, and keeps to a local-attention window there.
"""

from __future__ import annotations

import math

import numpy as np

from sayso.engine.conformer.weights import Linear, linear, matrix_source
from sayso.engine.gguf.reader import ModelFile
from sayso.engine.ops import Ops, Tensor, WeightSource

SPAN_STEP = 64
"""Frames (5.12 s after 8x subsampling) the position tables' length is rounded up to: a dictation
whose audio grows chunk by chunk remakes them every few seconds of speech, not at every chunk."""


def relative_sinusoids(length: int, d_model: int) -> np.ndarray:
    """NeMo's relative positional table [2*length - 1, d_model], float32: row i is position
    ``length - 1 - i`` (from +(length-1) down to -(length-1)), with ``sin(pos·w_k)`` in column 2k and
    ``cos(pos·w_k)`` in column 2k+1, ``w_k = 10000^(-2k/d_model)``; computed in float32 as
    transcribe.cpp does."""
    k = np.arange(d_model // 2, dtype=np.float32)
    div = np.exp(np.float32(2) * k * np.float32(-math.log(10000.0) / d_model)).astype(np.float32)
    positions = (np.float32(length - 1) - np.arange(2 * length - 1, dtype=np.float32))[:, None]
    table = np.empty((2 * length - 1, d_model), np.float32)
    table[:, 0::2] = np.sin(positions * div)
    table[:, 1::2] = np.cos(positions * div)
    return table


class RelPositionAttention:
    """Relative-position multi-head self-attention of one Conformer block (see the module docstring).

    ``window`` = (left, right) limits each query to keys i-left..i+right (local attention); None is
    full attention.
    """

    def __init__(self, model_file: ModelFile, ops: Ops, prefix: str, n_heads: int,
                 window: tuple[int, int] | None):
        self.n_heads = n_heads
        self.window = window
        query = matrix_source(model_file, f"{prefix}.linear_q.weight")
        d = query.shape[1]
        dh = d // n_heads
        self.scale = 1.0 / math.sqrt(dh)
        u = model_file.array(f"{prefix}.pos_bias_u").reshape(n_heads, dh)
        v = model_file.array(f"{prefix}.pos_bias_v").reshape(n_heads, dh)
        self.position = ops.weight(matrix_source(model_file, f"{prefix}.linear_pos.weight"))  # P = sinusoids · Wposᵀ
        # The bias scale · (v - u)_h·P_h of every head at once: P · Bᵀ, B [H, d] zero outside head h's
        # columns of row h.
        heads = np.zeros((n_heads, n_heads, dh), np.float32)
        heads[np.arange(n_heads), np.arange(n_heads)] = (v - u) * self.scale
        shape = (n_heads, d)
        self.head_sums = ops.weight(WeightSource(f"{prefix}.head_sums", "F32", shape, heads.reshape(shape)))
        q_bias = model_file.array(f"{prefix}.linear_q.bias") if model_file.has(f"{prefix}.linear_q.bias") else 0
        self.q = Linear(ops.weight(query), ops.tensor(q_bias + u.reshape(-1)))
        self.k, self.v, self.out = (linear(model_file, ops, f"{prefix}.{name}")
                                    for name in ("linear_k", "linear_v", "linear_out"))
        self._positions: tuple[int, Tensor, Tensor] | None = None  # (L, P [2L-1, d], bias [2L-1, H])

    def __call__(self, ops: Ops, h: Tensor, x: Tensor) -> Tensor:
        """``x + attention(h)``: h is the LayerNorm'd input [T, d], x the residual stream [T, d]."""
        positions, position_bias = self._positions_for(ops, h.shape[0])
        q = ops.gemm(h, self.q.weight, self.q.bias)  # q + u
        k = ops.gemm(h, self.k.weight, self.k.bias)
        v = ops.gemm(h, self.v.weight, self.v.bias)
        heard = ops.relative_attention(q, k, v, positions, position_bias, self.n_heads, self.scale, self.window)
        return ops.gemm(heard, self.out.weight, self.out.bias, residual=x)

    def _positions_for(self, ops: Ops, t: int) -> tuple[Tensor, Tensor]:
        """(P [2L-1, d], bias [2L-1, H]) for some L >= t, made on the backend when t outgrows them."""
        if self._positions is None or self._positions[0] < t:
            span = -(-t // SPAN_STEP) * SPAN_STEP
            sinusoids = ops.tensor(relative_sinusoids(span, self.position.shape[1]))
            positions = ops.gemm(sinusoids, self.position)
            self._positions = (span, positions, ops.gemm(positions, self.head_sums))
        return self._positions[1:]


class RotaryAttention:
    """GigaAM's rotary self-attention of one block: q, k from the rotated input, v from the plain one."""

    def __init__(self, model_file: ModelFile, ops: Ops, prefix: str, n_heads: int, base: float):
        self.n_heads = n_heads
        self.base = base
        self.q, self.k, self.v, self.out = (linear(model_file, ops, f"{prefix}.{name}")
                                            for name in ("linear_q", "linear_k", "linear_v", "linear_out"))

    def __call__(self, ops: Ops, h: Tensor, x: Tensor) -> Tensor:
        """``x + attention(h)``: h is the LayerNorm'd input [T, d], x the residual stream [T, d]."""
        head_dim = h.shape[1] // self.n_heads
        rotated = ops.rotary(h, self.n_heads, head_dim, self.base, 0, interleaved=False)
        q = ops.gemm(rotated, self.q.weight, self.q.bias)
        k = ops.gemm(rotated, self.k.weight, self.k.bias)
        v = ops.gemm(h, self.v.weight, self.v.bias)
        heard = ops.attention(q, k, v, self.n_heads)
        return ops.gemm(heard, self.out.weight, self.out.bias, residual=x)
