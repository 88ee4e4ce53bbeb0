"""The two self-attentions of the Conformer families, on ``engine.ops``.

* ``RelPositionAttention`` (Parakeet, NeMo's ``RelPositionMultiHeadAttention``): Transformer-XL
  relative positions. The score of query i and key j, per head, is
  ``((q_i + u)·k_j + (q_i + v)·p_{i-j}) / sqrt(dh)`` with ``p = linear_pos(sinusoid table)`` and
  learned biases u, v (``pos_bias_u``/``pos_bias_v``).
* ``RotaryAttention`` (GigaAM): rotary positions applied to the layer input *before* the query and
  key projections (the value projection sees the unrotated input), base ``pos_emb_max_len``.

How the relative-position term is computed on the existing ops: the position projections
``p`` depend only on the sequence length T, not on the audio, so for each T they are computed once
on the host and uploaded as weights, one per head, scaled by 1/sqrt(dh): ``P_h`` [2T-1, dh]. Then
per head ``rel_h = (q_i + u)·P_hᵀ + (v - u)·P_hᵀ`` is a GEMM of the head's query against ``P_h``
with the constant second term as its bias, and ``ops.attention`` adds it to the scores. Attention
runs head by head (the ops have no way to stack per-head GEMM outputs into one [H, T, 2T-1]
tensor), each head's output projected by its share of ``linear_out`` and accumulated through the
GEMM's residual epilogue. A fused GPU kernel would take q·Pᵀ inside the attention loop instead:
``attention(..., rel_q=q + v, rel_p=P)`` adding ``rel_q_i·rel_p_{(T-1)+j-i}·scale`` per key, which
removes the per-head split and the [T, 2T-1] score tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.conformer.weights import (
    Linear,
    column_slice,
    dequantized,
    linear,
    matrix_source,
    optional_vector,
    row_slice,
)
from engine.gguf.reader import ModelFile
from engine.ops import Ops, Tensor, WeightSource

MASKED = np.float32(-1e30)
"""Added to the scores of keys outside a local-attention window: finite, so a block of keys that
are all masked never turns a running softmax into NaN, and exp() of it is exactly 0 next to any
real score."""


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


@dataclass
class HeadProjections:
    """One head's slices: q/k/v [dh, d] (q's bias includes ``pos_bias_u``), out [d, dh]."""

    q: Linear
    k: Linear
    v: Linear
    out: Linear


class RelPositionAttention:
    """Relative-position multi-head self-attention of one Conformer block (see the module docstring).

    ``window`` = (left, right) limits each query to keys i-left..i+right (local attention); None is
    full attention.
    """

    def __init__(self, model_file: ModelFile, ops: Ops, prefix: str, n_heads: int,
                 window: tuple[int, int] | None):
        self.n_heads = n_heads
        self.window = window
        sources = {name: matrix_source(model_file, f"{prefix}.{name}.weight")
                   for name in ("linear_q", "linear_k", "linear_v", "linear_out", "linear_pos")}
        d = sources["linear_q"].shape[1]
        dh = d // n_heads
        self.scale = 1.0 / math.sqrt(dh)
        u = model_file.array(f"{prefix}.pos_bias_u").reshape(n_heads, dh)
        v = model_file.array(f"{prefix}.pos_bias_v").reshape(n_heads, dh)
        self.bias_v_minus_u = (v - u).astype(np.float32)  # q + v = (q + u) + (v - u)
        self.pos_projection = dequantized(sources["linear_pos"])  # host [d, d]: applied per length
        biases = {name: _host_bias(model_file, f"{prefix}.{name}.bias")
                  for name in ("linear_q", "linear_k", "linear_v")}
        out_bias = optional_vector(model_file, ops, f"{prefix}.linear_out.bias")

        def head_linear(name: str, h: int, extra: np.ndarray | None = None) -> Linear:
            rows = slice(h * dh, (h + 1) * dh)
            bias = biases[name][rows] if biases[name] is not None else None
            if extra is not None:
                bias = extra if bias is None else bias + extra
            weight = ops.weight(row_slice(sources[name], rows.start, rows.stop))
            return Linear(weight, None if bias is None else ops.tensor(bias))

        self.heads = [
            HeadProjections(
                q=head_linear("linear_q", h, u[h]),
                k=head_linear("linear_k", h),
                v=head_linear("linear_v", h),
                out=Linear(ops.weight(column_slice(sources["linear_out"], h * dh, (h + 1) * dh)),
                           out_bias if h == 0 else None),
            )
            for h in range(n_heads)
        ]
        self._table: np.ndarray | None = None  # host linear_pos(sinusoids) for the longest length so far
        self._positions: tuple[int, list[tuple[object, Tensor]]] | None = None  # (T, per-head P_h, bias)

    def __call__(self, ops: Ops, h: Tensor, x: Tensor) -> Tensor:
        """``x + attention(h)``: h is the LayerNorm'd input [T, d], x the residual stream [T, d]."""
        t = h.shape[0]
        for head, (positions, position_bias) in zip(self.heads, self._head_positions(ops, t)):
            q = ops.gemm(h, head.q.weight, head.q.bias)
            k = ops.gemm(h, head.k.weight, head.k.bias)
            v = ops.gemm(h, head.v.weight, head.v.bias)
            rel = ops.gemm(q, positions, position_bias)  # [T, 2T-1], pre-scaled
            rel.shape = (1, t, 2 * t - 1)  # a row-major reshape, free on both backends' tensors
            heard = ops.attention(q, k, v, 1, scale=self.scale, rel=rel)
            x = ops.gemm(heard, head.out.weight, head.out.bias, residual=x)
        return x

    def _head_positions(self, ops: Ops, t: int) -> list[tuple[object, Tensor]]:
        """Per head (P_h weight [2t-1, dh], rel bias [2t-1]) for sequences of length t, cached for the
        last length (the engine's windows mostly share one)."""
        if self._positions is not None and self._positions[0] == t:
            return self._positions[1]
        d = self.pos_projection.shape[0]
        dh = d // self.n_heads
        longest = 0 if self._table is None else (self._table.shape[0] + 1) // 2
        if t > longest:
            self._table = relative_sinusoids(t, d) @ self.pos_projection.T
            longest = t
        table = self._table[longest - t : longest + t - 1] * np.float32(self.scale)  # rows +(t-1)..-(t-1)
        mask = np.zeros(2 * t - 1, np.float32)
        if self.window is not None:
            left, right = self.window
            offset = np.arange(2 * t - 1) - (t - 1)  # j - i of each rel column
            mask[(offset < -left) | (offset > right)] = MASKED
        heads = []
        for h in range(self.n_heads):
            p_h = np.ascontiguousarray(table[:, h * dh : (h + 1) * dh])
            bias = p_h @ self.bias_v_minus_u[h] + mask
            weight = ops.weight(WeightSource(f"rel_pos.{t}.head{h}", "F32", p_h.shape, p_h))
            heads.append((weight, ops.tensor(bias)))
        self._positions = (t, heads)
        return heads


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


def _host_bias(model_file: ModelFile, name: str) -> np.ndarray | None:
    return model_file.array(name) if model_file.has(name) else None
