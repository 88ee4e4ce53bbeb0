"""Linear algebra on the GPU: GEMM and GEMV with fused epilogues, add, token embedding.

Kernels: ``shaders/gemm.wgsl`` (entry points ``gemm`` and ``gemv``, sharing the weight decoding
and the epilogue), ``shaders/embed.wgsl``, ``shaders/elementwise.wgsl``.
Weights stay in their GGUF type (F32, F16, Q8_0) and are decoded in the kernels; the type and the
epilogue are override constants, so each combination is its own specialised pipeline.
"""

from __future__ import annotations

from sayso.engine.gpu.entry_points import (
    ADD, EMBED, GEMM, GEMM_LARGE, GEMM_MATRIX, GEMM_SHORT, GEMM_SPLITS_SUM, GEMV, EntryPoint,
)
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.recorder import grid
from sayso.engine.gpu.tensors import GpuTensor, GpuWeight
from sayso.engine.ops import Activation, Position, RowNorm

ACTIVATIONS = {"none": 0, "gelu": 1, "silu": 2, "relu": 3, "tanh": 4, "square": 5}  # gemm.wgsl's ACT
WEIGHT_TYPES = {"F32": 0, "F16": 1, "Q8_0": 2}  # WTYPE in gemm.wgsl and embed.wgsl
GEMM_TILE = 64  # output rows and columns per GEMM workgroup (gemm.wgsl's TILE)
LARGE_TILE = 128  # the same for gemm_large (gemm.wgsl's LARGE_TILE)
LARGE_TILE_BYTES = 32768  # gemm_large's workgroup memory
LARGE_TILE_MIN_ROWS = 1024
"""Fewest rows of a for gemm_large: below that its 4x fewer workgroups leave a large GPU part idle, and
the 64-row tiles are faster (an encoder of a few seconds of audio, a batch of decoder tokens; docs/PERFORMANCE.md:
gemm_large threshold)."""
SHORT_TILE = 16  # output rows per gemm_short workgroup (gemm.wgsl's SHORT_ROWS)
SHORT_TILE_MAX_ROWS = 256
"""Most rows of a for gemm_short: up to a few 64-row tiles, whose few workgroups would each walk all of
K alone (docs/PERFORMANCE.md: gemm_short and K in parts)."""
SPLIT_TARGET_GROUPS = 512
"""Workgroups gemm_short should have to keep a large GPU busy (a few per compute unit): fewer output
tiles than that have K cut into parts (``SPLITS``) until there are about as many."""
SPLIT_MIN_K = 256
"""Fewest values of K a split takes: a shorter part costs more in its partial sums than it saves."""
MATRIX_TILE = 128  # output rows and columns per gemm_matrix workgroup (gemm_matrix.wgsl's MX_TILE)
MATRIX_MIN_ROWS = 1024
"""Fewest rows of a for gemm_matrix, where the fast tier has it: below that its 128-row tiles leave a
large GPU part idle and the FMA tiles are faster (docs/PERFORMANCE.md: gemm_matrix)."""
GEMV_ROWS = 8  # outputs per GEMV workgroup (gemm.wgsl's GEMV_ROWS)
NORM_FOLD_MAX_N = 8192
"""Most outputs of a gemv that normalises its row in every workgroup (``norm``): each one's two
reductions over the row cost little beside 8 rows of W, but over Whisper's logits (51865 outputs,
6484 workgroups) the repeated norms cost several times the product itself."""
GROUP = 256  # threads per workgroup of the one-value-per-thread kernels


def _groups_for(count: int) -> tuple[int, int, int]:
    """Workgroups for ``count`` values at one value per thread."""
    return grid(-(-count // GROUP))


class LinearOps(GpuOpsBase):
    """The ``linear`` kernel group of ``engine.ops.Ops`` (see there for the exact semantics)."""

    folds_row_norms = True  # gemv's NORM variant

    def gemm(
        self,
        a: GpuTensor,
        w: GpuWeight,
        bias: GpuTensor | None = None,
        act: Activation = "none",
        residual: GpuTensor | None = None,
        alpha: float = 1.0,
    ) -> GpuTensor:
        """a: [M, K], w: [N, K], bias: [N], residual: [M, N] -> [M, N] in 64x64 output tiles; 16x64
        ones up to ``SHORT_TILE_MAX_ROWS`` rows (with K in parts when they are too few to fill the GPU),
        128x128 ones from ``LARGE_TILE_MIN_ROWS`` where the device has the workgroup memory; 128x128
        tiles on subgroup matrices (f16 products, f32 sums) from ``MATRIX_MIN_ROWS`` where the fast tier
        has them."""
        m = self._check_linear(a, w, bias, residual)
        out = self.empty((m, w.n))
        if m >= MATRIX_MIN_ROWS and self.fast.is_on(GEMM_MATRIX):
            tiles = (-(-w.n // MATRIX_TILE), -(-m // MATRIX_TILE), 1)
            self._linear(GEMM_MATRIX, tiles, a, w, bias, act, residual, alpha, out)
            return out
        limit = self.device.limits["max-compute-workgroup-storage-size"]
        if m >= LARGE_TILE_MIN_ROWS and limit >= LARGE_TILE_BYTES:
            entry, rows, cols = GEMM_LARGE, LARGE_TILE, LARGE_TILE
        elif m <= SHORT_TILE_MAX_ROWS:
            entry, rows, cols = GEMM_SHORT, SHORT_TILE, GEMM_TILE
        else:
            entry, rows, cols = GEMM, GEMM_TILE, GEMM_TILE
        tiles = (-(-w.n // cols), -(-m // rows))
        splits = min(-(-SPLIT_TARGET_GROUPS // (tiles[0] * tiles[1])), w.k // SPLIT_MIN_K) if entry is GEMM_SHORT else 1
        if splits > 1:
            self._split_gemm(tiles, splits, a, w, bias, act, residual, alpha, out)
        else:
            self._linear(entry, (*tiles, 1), a, w, bias, act, residual, alpha, out)
        return out

    def _split_gemm(self, tiles: tuple[int, int], splits: int, a: GpuTensor, w: GpuWeight, bias: GpuTensor | None,
                    act: Activation, residual: GpuTensor | None, alpha: float, out: GpuTensor) -> None:
        """``gemm`` on gemm_short's ``tiles`` with K in ``splits`` parts: each part's plain sums into
        [splits, M, N], then gemm_splits_sum adds them in order and applies the epilogue into ``out``."""
        parts = self.empty((splits, *out.shape))
        self._linear(GEMM_SHORT, (*tiles, splits), a, w, None, "none", None, 1.0, parts, splits=splits)
        self._linear(GEMM_SPLITS_SUM, _groups_for(out.size), parts, w, bias, act, residual, alpha, out, splits=splits)

    def gemv(
        self,
        a: GpuTensor,
        w: GpuWeight,
        bias: GpuTensor | None = None,
        act: Activation = "none",
        residual: GpuTensor | None = None,
        alpha: float = 1.0,
        norm: RowNorm | None = None,
    ) -> GpuTensor:
        """a: [1, K] -> [1, N]: a workgroup per 8 outputs so a single row still spreads over the GPU.
        With ``norm`` every workgroup normalises the row itself (its K values are little to read next
        to its 8 rows of W), which saves the norm's own dispatch; past ``NORM_FOLD_MAX_N`` outputs the
        row is normalised once first instead."""
        if self._check_linear(a, w, bias, residual) != 1:
            raise ValueError(f"gemv takes one row, got a of shape {a.shape}; use gemm")
        if norm is not None and (norm.weight.shape != (w.k,) or (norm.bias is not None and norm.bias.shape != (w.k,))):
            raise ValueError(f"{w.name}: a norm over {norm.weight.shape} does not fit rows of {w.k}")
        if norm is not None and w.n > NORM_FOLD_MAX_N:
            a, norm = self.layer_norm(a, norm.weight, norm.bias, norm.eps), None
        out = self.empty((1, w.n))
        self._linear(GEMV, grid(-(-w.n // GEMV_ROWS)), a, w, bias, act, residual, alpha, out, norm)
        return out

    def add(self, x: GpuTensor, y: GpuTensor) -> GpuTensor:
        """x, y: same shape -> x + y."""
        if x.shape != y.shape:
            raise ValueError(f"add needs equal shapes, got {x.shape} and {y.shape}")
        out = self.empty(x.shape)
        self.run(ADD, [x, y, out], [out.size], _groups_for(out.size))
        return out

    def embed(self, ids: GpuTensor, table: GpuWeight, positions: GpuTensor | None, pos0: int | Position) -> GpuTensor:
        """ids: [T] uint32, table: weight [V, D], positions: [P, D] or None -> [T, D]."""
        (t,) = ids.shape
        d = table.k
        counter, offset = self.counter_and_offset(pos0)
        rows = range(offset, offset + t) if isinstance(pos0, int) else range(0)  # a Position's are on the GPU
        if positions is not None and (positions.shape[1] != d or rows.stop > positions.shape[0]):
            raise ValueError(
                f"positions {positions.shape} can't cover rows {rows.start}..{rows.stop - 1} of width {d} "
                f"({table.name})"
            )
        out = self.empty((t, d))
        scales = table.scales if table.scales is not None else table.data
        buffers = [ids, table.data, scales, positions if positions is not None else ids, out, counter]
        params = [t, d, table.k_pad, table.scales_per_row // 2, offset, 0 if positions is None else positions.shape[0]]
        constants = {"WTYPE": WEIGHT_TYPES[table.kind], "HAS_POS": positions is not None}
        self.run(EMBED, buffers, params, _groups_for(t * d), **constants)
        return out

    # ---- helpers ------------------------------------------------------------------------------

    @staticmethod
    def _check_linear(a: GpuTensor, w: GpuWeight, bias: GpuTensor | None, residual: GpuTensor | None) -> int:
        """Validate shapes (the kernels can't) and return M."""
        if len(a.shape) != 2 or a.shape[1] != w.k:
            raise ValueError(f"{w.name}: input of shape {a.shape} does not fit a weight of shape {w.shape}")
        m = a.shape[0]
        if bias is not None and bias.shape != (w.n,):
            raise ValueError(f"{w.name}: bias of shape {bias.shape}, expected ({w.n},)")
        if residual is not None and residual.shape != (m, w.n):
            raise ValueError(f"{w.name}: residual of shape {residual.shape}, expected ({m}, {w.n})")
        return m

    def _linear(
        self,
        entry: EntryPoint,
        groups: tuple[int, int, int],
        a: GpuTensor,
        w: GpuWeight,
        bias: GpuTensor | None,
        act: Activation,
        residual: GpuTensor | None,
        alpha: float,
        out: GpuTensor,
        norm: RowNorm | None = None,
        splits: int = 1,
    ) -> None:
        if act not in ACTIVATIONS:
            raise ValueError(f"unknown activation {act!r} (one of {', '.join(ACTIVATIONS)})")
        # Bindings a variant does not read still need a buffer: ``a`` stands in (read-only, so
        # binding it twice is allowed), which keeps one layout and no dummy allocations.
        scales = w.scales if w.scales is not None else w.data
        buffers = [a, w.data, scales, bias if bias is not None else a, residual if residual is not None else a, out]
        params = [out.shape[-2], w.n, w.k, w.k_pad, w.scales_per_row // 2, float(alpha), 0.0]
        variant = {
            "WTYPE": WEIGHT_TYPES[w.kind],
            "ACT": ACTIVATIONS[act],
            "HAS_BIAS": bias is not None,
            "HAS_RESIDUAL": residual is not None,
        }
        if splits > 1:
            variant["SPLITS"] = splits
        if entry is GEMM_SPLITS_SUM:
            del variant["WTYPE"]  # it reads no weight: one pipeline for every weight type
        if entry is GEMV:  # gemv's layout has the norm's bindings too
            buffers += [a, a] if norm is None else [norm.weight, norm.bias if norm.bias is not None else a]
            if norm is not None:
                params[-1] = float(norm.eps)
                variant["NORM"] = 1 if norm.bias is not None else 2
        self.run(entry, buffers, params, groups, **variant)
