"""Attention on the GPU: flash attention over whole sequences, and the decoder's f16 K/V cache.

Kernels: ``shaders/attention.wgsl`` (``attention``, ``relative_attention``), ``shaders/attention_tiled.wgsl``
(an encoder's attention, after ``attention_blocks.wgsl``; ``attention_tiled_subgroup.wgsl`` in the fast
tier) and ``shaders/kv_cache.wgsl``
(``kv_pack``, ``attend`` = its ``attend`` then, over more than one key block, ``combine`` entry points;
``attend``'s reductions in ``reduce_workgroup.wgsl``, and in the fast tier ``reduce_subgroup.wgsl``).
Semantics are those of ``engine.ops``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import wgpu

from sayso.engine.errors import GpuError
from sayso.engine.gpu.entry_points import (ATTENTION, ATTENTION_RELATIVE, ATTENTION_TILED, ATTENTION_TILED_SUBGROUP,
                                          KV_ATTEND, KV_COMBINE, KV_PACK)
from sayso.engine.gpu.ops.base import GpuOpsBase
from sayso.engine.gpu.recorder import grid
from sayso.engine.gpu.tensors import GpuColumns, GpuTensor, rows_of
from sayso.engine.ops import Position, check_relative_attention

MAX_HEAD_DIM = 128
"""Largest head size the kernels take: 8 threads per query row times 4 quads of 4 output dims per
thread in ``attention.wgsl`` (every model we run has 36 to 64)."""

Q_ROWS = 16  # query rows per flash-attention workgroup (Q_ROWS in attention.wgsl)
TILED_MAX_HEAD_DIM = 64  # attention_tiled.wgsl: one output quad per thread of a 16-thread row group
TILED_ROWS = 32  # query rows per attention_tiled.wgsl workgroup (16 * ROWS)
TILED_KEYS = 32  # BK in attention_tiled.wgsl and attention_tiled_subgroup.wgsl
TILED_SUBGROUP_ROWS = 64  # query rows per attention_tiled_subgroup.wgsl workgroup (ROWS_WG)
KEY_BLOCK = 64  # keys per attend workgroup (WG in kv_cache.wgsl): 1500 encoder positions -> 24 workgroups per head
PACK_THREADS = 64  # PACK_THREADS in kv_cache.wgsl
F32 = 4


@dataclass(eq=False)
class KvCache:
    """A preallocated K/V cache of ``capacity`` positions for ``n_heads`` heads of ``head_dim``.

    One buffer of u32 words, each holding two f16 values (``pack2x16float``: dims 2c and 2c+1 of a
    head; an odd ``head_dim`` pads its last pair with a zero). ``pairs`` = ceil(head_dim / 2).

    * K: ``[n_heads, capacity, pairs]`` starting at word 0;
    * V: ``[n_heads, capacity, pairs]`` starting at word ``n_heads * capacity * pairs``.

    Head-major so that one head's block of consecutive positions (what an ``attend`` workgroup
    reads) is contiguous. f16 halves the memory and bandwidth of the decoder's largest reads
    (Whisper's cross-attention over 1500 positions, every step) at ~1e-3 relative error; values
    beyond the f16 range (65504) would become infinite.
    """

    n_heads: int
    head_dim: int
    capacity: int
    buffer: wgpu.GPUBuffer
    pending: tuple | None = None
    """(k, v, pos0) of a one-row ``kv_pack`` not recorded yet: the ``attend`` that reads it next
    packs it in the same dispatch (kv_cache.wgsl's ``packs``) when it reads its position from the
    same counter, and anything else on this cache records it first, so the order of writes and
    reads is the one asked for."""

    @property
    def pairs(self) -> int:
        return _pairs(self.head_dim)

    @property
    def nbytes(self) -> int:
        return self.bytes_for(self.n_heads, self.head_dim, self.capacity)

    @staticmethod
    def bytes_for(n_heads: int, head_dim: int, capacity: int) -> int:
        return 2 * n_heads * capacity * _pairs(head_dim) * 4


def _pairs(head_dim: int) -> int:
    """u32 words per cached head row: two f16 each, an odd head_dim's last one half empty."""
    return (head_dim + 1) // 2


def _check_heads(name: str, x: GpuTensor, n_heads: int, head_dim: int | None = None) -> int:
    """The head size of x: [T, H*dh], raising ValueError on a shape the kernels can't take."""
    if len(x.shape) != 2 or x.shape[1] % n_heads:
        raise ValueError(f"{name} must be [T, {n_heads}*head_dim], got {x.shape}")
    dh = x.shape[1] // n_heads
    if head_dim is not None and dh != head_dim:
        raise ValueError(f"{name} has head_dim {dh}, expected {head_dim}")
    if not 0 < dh <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim {dh} of {name} is outside 1..{MAX_HEAD_DIM}")
    return dh


class AttentionOps(GpuOpsBase):
    """``attention``, ``relative_attention``, ``kv_cache``, ``kv_pack`` and ``attend`` of ``engine.ops.Ops``."""

    def _key_block(self, head_dim: int, relative: bool = False) -> int:
        """Keys per flash-attention block: 32, or 16 or 8 where the tiles of more would not fit the
        device's workgroup memory (head_dim 128 on lavapipe's 32 KiB). ``relative``: the kernel also
        stages the keys' position rows, Q_ROWS - 1 more than keys (attention.wgsl's ``position_tile``)."""
        limit = self.device.limits["max-compute-workgroup-storage-size"]
        quads = -(-head_dim // 4)  # the tiles hold vec4s; QUADS and K_STRIDE in attention.wgsl
        stride = quads | 1
        for keys in (32, 16, 8):
            vec4s = Q_ROWS * quads + keys * stride + keys * quads + (keys + Q_ROWS - 1) * stride * relative
            if (4 * vec4s + Q_ROWS * keys) * F32 <= limit:
                return keys
        raise GpuError(f"Flash attention with head_dim {head_dim} needs more workgroup memory than the {limit} bytes this GPU has.")

    def _tiled_fits(self, head_dim: int, subgroup: bool = False) -> bool:
        """Whether attention_tiled.wgsl's tiles for ``head_dim`` fit the device's workgroup memory
        (29 KiB for head_dim 64), or with ``subgroup`` attention_tiled_subgroup.wgsl's (41 KiB)."""
        quads = head_dim // 4
        keys = TILED_KEYS * (quads | 1) + TILED_KEYS * quads
        if subgroup:  # q, k, v and p tiles
            nbytes = 4 * F32 * (TILED_SUBGROUP_ROWS * quads + keys + TILED_SUBGROUP_ROWS * TILED_KEYS // 4)
        else:  # q, k, v tiles and a score tile with a padded row
            nbytes = 4 * F32 * (TILED_ROWS * quads + keys) + TILED_ROWS * (TILED_KEYS + 1) * F32
        return nbytes <= self.device.limits["max-compute-workgroup-storage-size"]

    def attention(self, q, k, v, n_heads, causal=False, scale=None, batch=1) -> GpuTensor:
        dh = _check_heads("q", q, n_heads)
        for name, x in (("k", k), ("v", v)):
            _check_heads(name, x, n_heads, dh)
        if k.shape != v.shape:
            raise ValueError(f"k {k.shape} and v {v.shape} differ")
        if batch != 1 and (causal or q.shape[0] % batch or k.shape[0] % batch):
            raise ValueError(f"a batch of {batch} sequences of equal length attends without causal")
        tq, tk = q.shape[0] // batch, k.shape[0] // batch
        out = self.empty(q.shape)
        if tq == 0:
            return out
        scale = 1.0 / math.sqrt(dh) if scale is None else scale
        tiled = not causal and tk and dh % 4 == 0 and dh <= TILED_MAX_HEAD_DIM and self._tiled_fits(dh)
        if tiled:  # an encoder's attention: the register-tiled kernel, every sequence of a batch in one dispatch
            fast = self.fast.is_on(ATTENTION_TILED_SUBGROUP) and self._tiled_fits(dh, subgroup=True)
            groups = batch * n_heads * -(-tq // (TILED_SUBGROUP_ROWS if fast else TILED_ROWS))
            self.run(ATTENTION_TILED_SUBGROUP if fast else ATTENTION_TILED, [q, k, v, out],
                     [tq, tk, n_heads, float(scale), groups, batch], grid(groups), HEAD_DIM=dh)
            return out
        groups = batch * n_heads * -(-tq // Q_ROWS)
        self.run(ATTENTION, [q, k, v, out], [tq, tk, n_heads, int(causal), float(scale), groups, batch, 0, 0, 0],
                 grid(groups), HEAD_DIM=dh, BK=self._key_block(dh))
        return out

    def relative_attention(self, q, k, v, positions, bias, n_heads, scale, window=None) -> GpuTensor:
        """q, k, v [T, H*dh], positions [2L-1, H*dh], bias [2L-1, H] -> [T, H*dh] (see ``Ops``): one
        dispatch for every head, the position term of each score taken inside the flash walk over the
        keys, so no [H, T, 2T-1] table of position scores is written or bound; a window's keys only."""
        dh = _check_heads("q", q, n_heads)
        span = check_relative_attention(q, k, v, positions, bias, n_heads)  # k, v and positions as wide as q
        t = q.shape[0]
        left, right = (t, t) if window is None else (min(window[0], t), min(window[1], t))
        out = self.empty(q.shape)
        groups = n_heads * -(-t // Q_ROWS)
        self.run(ATTENTION_RELATIVE, [q, k, v, out, positions, bias],
                 [t, t, n_heads, 0, float(scale), groups, 1, span, left, right], grid(groups),
                 HEAD_DIM=dh, BK=self._key_block(dh, relative=True))
        return out

    def kv_cache(self, n_heads, head_dim, capacity) -> KvCache:
        if not 0 < head_dim <= MAX_HEAD_DIM:
            raise ValueError(f"head_dim {head_dim} is outside 1..{MAX_HEAD_DIM}")
        nbytes = KvCache.bytes_for(n_heads, head_dim, capacity)
        if nbytes > self.device.max_binding:
            raise GpuError(
                f"A K/V cache of {nbytes / 2**20:.0f} MiB exceeds this GPU's binding limit of "
                f"{self.device.max_binding / 2**20:.0f} MiB. Use a shorter context or --device cpu."
            )
        return KvCache(n_heads, head_dim, capacity, self.device.buffer(nbytes, label="kv-cache"))

    def columns(self, x: GpuTensor, start: int, stop: int) -> GpuColumns:
        if len(x.shape) != 2 or not 0 <= start <= stop <= x.shape[1]:
            raise ValueError(f"columns {start}..{stop} are not within a tensor of shape {x.shape}")
        return GpuColumns(x, start, stop - start)

    def rows(self, x: GpuTensor, start: int, stop: int) -> GpuColumns:
        if len(x.shape) != 2 or not 0 <= start <= stop <= x.shape[0]:
            raise ValueError(f"rows {start}..{stop} are not within a tensor of shape {x.shape}")
        return GpuColumns(x, start * x.shape[1], x.shape[1], stop - start)

    def kv_pack(self, cache: KvCache, k, v, pos0) -> None:
        _check_heads("k", k, cache.n_heads, cache.head_dim)
        if k.shape != v.shape:
            raise ValueError(f"k {k.shape} and v {v.shape} differ")
        rows = k.shape[0]
        if isinstance(pos0, int) and (pos0 < 0 or pos0 + rows > cache.capacity):
            raise ValueError(f"rows {pos0}..{pos0 + rows - 1} do not fit a cache of {cache.capacity} positions")
        self._pack_pending(cache)  # packs land in the order they were asked for
        if rows == 1:
            cache.pending = (k, v, pos0)  # a decoder step's row: the attend that reads it packs it
            return
        self._pack(cache, k, v, pos0)

    def _pack(self, cache: KvCache, k, v, pos0: int | Position) -> None:
        words = 2 * k.shape[0] * cache.n_heads * cache.pairs
        if words == 0:
            return
        counter, offset = self.counter_and_offset(pos0)
        self.run(
            KV_PACK,
            [k.buffer, v.buffer, cache.buffer, counter],  # .buffer: columns are bound whole, found by offset
            self._cache_params(cache, rows=k.shape[0], pos0=offset, groups=words, k=k, v=v),
            grid(-(-words // PACK_THREADS)),
            HEAD_DIM=cache.head_dim,
        )

    def _pack_pending(self, cache: KvCache) -> None:
        if cache.pending is not None:
            k, v, pos0 = cache.pending
            cache.pending = None
            self._pack(cache, k, v, pos0)

    def attend(self, q, cache: KvCache, length, causal=True, scale=None) -> GpuTensor:
        dh = _check_heads("q", q, cache.n_heads, cache.head_dim)
        walks = isinstance(length, Position)  # one workgroup walks each row's keys (kv_cache.wgsl)
        if not walks and not 0 < length <= cache.capacity:
            raise ValueError(f"length {length} is outside 1..{cache.capacity} (the cache's capacity)")
        tq, heads = q.shape[0], cache.n_heads
        out = self.empty(q.shape)
        if tq == 0:
            return out
        counter, length_offset = self.counter_and_offset(length)
        blocks = 1 if walks else -(-length // KEY_BLOCK)
        scale = 1.0 / math.sqrt(dh) if scale is None else scale
        common = dict(rows=tq, length=length_offset, causal=int(causal), scale=float(scale), blocks=blocks,
                      span=cache.capacity if walks else KEY_BLOCK)
        # A decoder step (one row, one workgroup per head) packs its K/V row itself, if its position
        # is read from the counter bound here too; otherwise the cache's pending row is packed first
        # and q stands in for the k and v that attend then doesn't read.
        k, v, pos0 = cache.pending or (q, q, 0)
        pack_counter, pack_offset = self.counter_and_offset(pos0)
        packs = cache.pending is not None and tq == 1 and blocks == 1 and pack_counter is counter
        if not packs:
            self._pack_pending(cache)
            k, v, pack_offset = q, q, 0
        cache.pending = None
        # (max, sum, weighted V) per block; with one block attend writes the answer to out itself
        partials = self.empty((heads * tq * blocks, dh + 2)) if blocks > 1 else out
        self.run(
            KV_ATTEND,
            [k.buffer, v.buffer, cache.buffer, counter, q.buffer, partials],
            self._cache_params(cache, groups=heads * tq * blocks, pos0=pack_offset, q=q, k=k, v=v, packs=int(packs),
                               **common),
            grid(heads * tq * blocks),
            HEAD_DIM=dh,
            WG=KEY_BLOCK,
        )
        if blocks == 1:
            return out
        self.run(
            KV_COMBINE,
            [partials, out],
            self._cache_params(cache, groups=heads * tq, **common),
            grid(heads * tq),
            HEAD_DIM=dh,
        )
        return out

    @staticmethod
    def _cache_params(cache: KvCache, rows: int, groups: int, pos0: int = 0, length: int = 0, causal: int = 0,
                      scale: float = 0.0, blocks: int = 0, q=None, k=None, v=None, packs: int = 0,
                      span: int = 0) -> list[int | float]:
        """The ``Params`` block of kv_cache.wgsl, field by field in its order. ``q``, ``k``, ``v``: the
        inputs the entry point reads, tensors or columns, whose rows it finds by offset and stride.
        ``pos0`` and ``length``: what the kernel adds to the position counter it is given."""
        stride, at = None, []
        for x in (q, k, v):
            first, row = rows_of(x) if x is not None else (0, stride)
            if stride is not None and row != stride:
                raise ValueError("q, k and v must have rows the same distance apart")
            stride = row
            at.append(first)
        stride = cache.n_heads * cache.head_dim if stride is None else stride
        return [rows, cache.n_heads, cache.capacity, pos0, length, causal, float(scale), blocks, groups, *at, stride,
                packs, span]
