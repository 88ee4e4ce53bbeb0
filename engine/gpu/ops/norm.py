"""Normalisations and activations on the GPU: LayerNorm, GroupNorm, softmax, GLU, SwiGLU, rotary.

Kernels live in ``shaders/norm.wgsl`` (its reductions in ``reduce_workgroup.wgsl``, and in the fast
tier ``reduce_subgroup.wgsl``), ``shaders/activation.wgsl`` and ``shaders/rotary.wgsl``.
Row reductions (LayerNorm, softmax) give each row one workgroup sized to the row, so short rows
don't pay for barriers of idle threads; GroupNorm reduces a group in chunks so that one large group
(Moonshine's stem: 1500 x 416 values) still spreads over the GPU.
"""

from __future__ import annotations

import numpy as np
import wgpu

from sayso.engine.gpu.entry_points import (GLU, GROUP_APPLY, GROUP_COMBINE, GROUP_STATS, LAYER_NORM, ROTARY, SOFTMAX,
                                           SWIGLU, EntryPoint)
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.recorder import grid
from sayso.engine.gpu.tensors import GpuTensor

ROW_THREADS = 256  # most threads a row reduction uses; rows longer than this loop
ELEMENT_THREADS = 256  # workgroup size of the elementwise kernels (WG in their shaders)
CHUNK = 4096  # GroupNorm values per reducing workgroup: 16 per thread, enough to hide the barriers
MAX_CHUNKS = 256  # per group, so that combining a group's chunks stays a short serial loop


def _row_threads(cols: int) -> int:
    """Threads of a row-reduction workgroup: a power of two (for the tree), at most one per value."""
    return min(ROW_THREADS, max(32, 1 << (max(cols, 1) - 1).bit_length()))


def _elements(n: int) -> tuple[int, int, int]:
    """The dispatch grid of an elementwise kernel over ``n`` outputs."""
    return grid(-(-n // ELEMENT_THREADS))


def _rows(x: GpuTensor, what: str) -> tuple[int, int]:
    if len(x.shape) != 2:
        raise ValueError(f"{what} expects a 2-D tensor [M, N], got shape {x.shape}")
    return x.shape


def rotary_turns(rot_dim: int, base: float) -> np.ndarray:
    """Each rotary pair's frequency in turns per position, split for exact products on the GPU.

    Returns float32 [rot_dim/2, 2]: (hi, lo) with ``hi + lo`` = ``base**(-2i/rot_dim) / 2π`` and hi
    rounded to 12 significant bits, so that hi times a 12-bit part of a position is exact in f32
    (see shaders/rotary.wgsl).
    """
    turns = base ** (-np.arange(0, rot_dim, 2, dtype=np.float64) / rot_dim) / (2 * np.pi)
    mantissa, exponent = np.frexp(turns)
    hi = np.ldexp(np.round(mantissa * 4096), exponent - 12)
    return np.stack([hi, turns - hi], axis=1).astype(np.float32)


class NormOps(GpuOpsBase):
    """LayerNorm, GroupNorm, softmax, gated activations and rotary embeddings."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Frequency tables by (rot_dim, base): uploaded once, never pooled, as every step reuses them.
        self._rotary_tables: dict[tuple[int, float], wgpu.GPUBuffer] = {}

    def layer_norm(self, x: GpuTensor, w: GpuTensor | None, b: GpuTensor | None, eps: float = 1e-5) -> GpuTensor:
        """x: [M, D] -> [M, D], each row normalised over D then ``* w + b`` (w, b: [D] or None).

        A missing w or b is switched off by an override constant; x is bound in its place because
        every binding of the pipeline must hold some buffer.
        """
        rows, cols = _rows(x, "layer_norm")
        out = self.empty((rows, cols))
        if rows == 0:  # an empty problem is how the fast tier's probe calls the kernel
            return out
        self.run(
            LAYER_NORM,
            [x, w if w is not None else x, b if b is not None else x, out],
            [rows, cols, float(eps)],
            grid(rows),
            WG=_row_threads(cols),
            HAS_W=w is not None,
            HAS_B=b is not None,
        )
        return out

    def softmax(self, x: GpuTensor) -> GpuTensor:
        """x: [M, N] -> [M, N], each row's softmax over N (max-subtracted, so large logits are safe)."""
        rows, cols = _rows(x, "softmax")
        out = self.empty((rows, cols))
        if rows == 0:  # as in layer_norm
            return out
        self.run(SOFTMAX, [x, out], [rows, cols, 0.0], grid(rows), WG=_row_threads(cols))
        return out

    def group_norm(self, x: GpuTensor, groups: int, w: GpuTensor, b: GpuTensor, eps: float = 1e-5) -> GpuTensor:
        """x: [T, C] -> [T, C]; each of ``groups`` channel groups normalised over its T*C/groups
        values, then the per-channel affine w, b: [C].

        Three dispatches: per-chunk statistics, a per-group merge, then the elementwise normalise.
        """
        t, c = _rows(x, "group_norm")
        if groups <= 0 or c % groups:
            raise ValueError(f"group_norm: {c} channels do not split into {groups} groups")
        cg = c // groups
        n = t * cg
        chunks = min(MAX_CHUNKS, max(1, -(-n // CHUNK)))
        chunk = max(1, -(-n // chunks))
        chunks = max(1, -(-n // chunk))  # rounding the chunk up can leave trailing chunks empty
        params = [t, c, groups, cg, n, chunk, chunks, float(eps)]
        partials = self.empty((groups * chunks, 4))
        self.run(GROUP_STATS, [x, partials], params, grid(groups * chunks), WG=_row_threads(chunk))
        stats = self.empty((groups, 2))
        self.run(GROUP_COMBINE, [partials, stats], params, grid(-(-groups // 64)))
        out = self.empty((t, c))
        self.run(GROUP_APPLY, [x, stats, w, b, out], params, _elements(t * c), WG=ELEMENT_THREADS)
        return out

    def glu(self, x: GpuTensor) -> GpuTensor:
        """x: [M, 2D] -> [M, D]: value half times sigmoid of the gate half (Conformer conv module)."""
        return self._gated(x, GLU)

    def swiglu(self, x: GpuTensor) -> GpuTensor:
        """x: [M, 2D] -> [M, D]: value half times silu of the gate half (Moonshine decoder FFN)."""
        return self._gated(x, SWIGLU)

    def _gated(self, x: GpuTensor, entry_point: EntryPoint) -> GpuTensor:
        rows, width = _rows(x, entry_point.entry)
        if width % 2:
            raise ValueError(f"{entry_point.entry} needs an even number of columns (value and gate halves), "
                             f"got {width}")
        d = width // 2
        out = self.empty((rows, d))
        self.run(entry_point, [x, out], [rows, d], _elements(rows * d))
        return out

    def rotary(self, x: GpuTensor, n_heads: int, rot_dim: int, base: float, pos0: int, interleaved: bool) -> GpuTensor:
        """x: [T, H*dh] -> [T, H*dh], the first ``rot_dim`` dims of each head rotated for position
        ``pos0 + t``; pairs (2i, 2i+1) if ``interleaved`` else (i, i + rot_dim/2)."""
        t, width = _rows(x, "rotary")
        if n_heads <= 0 or width % n_heads:
            raise ValueError(f"rotary: {width} columns do not split into {n_heads} heads")
        head_dim = width // n_heads
        if rot_dim % 2 or not 0 < rot_dim <= head_dim:
            raise ValueError(f"rotary: rot_dim {rot_dim} must be even and within the head size {head_dim}")
        key = (rot_dim, float(base))
        table = self._rotary_tables.get(key)
        if table is None:
            turns = rotary_turns(rot_dim, float(base))
            table = self.device.buffer(turns.nbytes, label=f"rotary-{rot_dim}-{base}")
            self.device.queue.write_buffer(table, 0, turns)
            self._rotary_tables[key] = table
        out = self.empty((t, width))
        self.run(
            ROTARY,
            [x, table, out],
            [t, width, head_dim, rot_dim, int(pos0)],
            _elements(t * width),
            INTERLEAVED=bool(interleaved),
        )
        return out
