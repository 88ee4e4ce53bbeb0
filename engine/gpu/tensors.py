"""GPU tensors, the buffer pool they come from, and weights uploaded in their GGUF type.

Activations are float32 buffers from a pool: when a ``GpuTensor`` is garbage collected its buffer
goes back to the pool and the next tensor of the same size class takes it. CPython frees
deterministically, so the same sequence of calls gets the same buffers, which is what lets the
recorder reuse its bind groups. Reuse while recorded work still reads a buffer is safe: dispatches
in a queue run in order and wgpu puts barriers between them.

Weights stay in their GGUF type on the GPU (a Q8_0 matrix costs 1.06 bytes per value, not 4) with
rows and columns zero-padded to the GEMM tile so kernels need no bounds checks on the weight side.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import wgpu

from engine.gguf.q8_0 import Q8_0_BLOCK, Q8_0_BLOCK_BYTES
from engine.gpu.device import Device
from engine.ops import WeightSource

ROW_TILE = 64  # weight rows (N) are padded to a multiple of this
COL_TILE = Q8_0_BLOCK  # weight columns (K) are padded to a multiple of this (one Q8_0 block)


def size_class(nbytes: int) -> int:
    """Round up so that tensors of nearby sizes share buffers: 256-byte steps below 64 KiB, then
    eight steps per power of two (at most 12.5% waste)."""
    if nbytes <= 65536:
        return max(256, (nbytes + 255) // 256 * 256)
    step = 1 << (nbytes.bit_length() - 4)
    return (nbytes + step - 1) // step * step


class BufferPool:
    """Free storage buffers by size class.

    ``take`` hands out the free buffer that was allocated first, not the one freed last: model code
    frees in another order than it allocates (``x = f(x)``), and a last-freed-first policy would
    make consecutive decoder steps alternate between buffers, so no bind group would ever be reused.
    """

    def __init__(self, device: Device) -> None:
        self.device = device
        self.free: dict[int, list[tuple[int, wgpu.GPUBuffer]]] = defaultdict(list)  # heaps by serial
        self.serials: dict[int, int] = {}  # id(buffer) -> allocation order
        self.counter = itertools.count()
        self.allocated_bytes = 0

    def take(self, nbytes: int) -> wgpu.GPUBuffer:
        size = size_class(nbytes)
        if self.free[size]:
            return heapq.heappop(self.free[size])[1]
        self.allocated_bytes += size
        buffer = self.device.buffer(size, label="activation")
        self.serials[id(buffer)] = next(self.counter)
        return buffer

    def give(self, buffer: wgpu.GPUBuffer) -> None:
        heapq.heappush(self.free[buffer.size], (self.serials[id(buffer)], buffer))

    def clear(self) -> None:
        """Drop the free buffers (after a long file, so an idle app does not hold peak memory)."""
        for heap in self.free.values():
            for _, buffer in heap:
                self.allocated_bytes -= buffer.size
                del self.serials[id(buffer)]
                buffer.destroy()
        self.free.clear()


class GpuTensor:
    """A float32 (or uint32 for ids) tensor in a pooled GPU buffer. ``shape`` is logical, row-major."""

    __slots__ = ("buffer", "shape", "dtype", "pool")

    def __init__(self, pool: BufferPool, shape: tuple[int, ...], dtype=np.float32) -> None:
        self.pool = pool
        self.shape = tuple(map(int, shape))
        self.dtype = np.dtype(dtype)
        self.buffer = pool.take(self.nbytes)

    def __del__(self) -> None:
        # Back to the pool as soon as the last reference goes (CPython frees deterministically);
        # cheaper per tensor than weakref.finalize, which a decoder step pays ~65 times.
        buffer = getattr(self, "buffer", None)  # None when take() failed in __init__
        if buffer is not None:
            self.pool.give(buffer)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize  # not through size: every new tensor asks

    def __repr__(self) -> str:
        return f"GpuTensor({self.shape}, {self.dtype.name})"


@dataclass(frozen=True)
class GpuColumns:
    """Columns ``start .. start+width`` of a tensor [T, N] (``Ops.columns``), left in place: the
    kernels that take one (kv_pack, attend) get the first float and the row stride N as parameters."""

    tensor: GpuTensor
    start: int
    width: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.tensor.shape[0], self.width)

    @property
    def buffer(self) -> wgpu.GPUBuffer:
        return self.tensor.buffer

    @property
    def stride(self) -> int:
        return self.tensor.shape[1]


def rows_of(x: GpuTensor | GpuColumns) -> tuple[int, int]:
    """(first float, row stride) of x's rows in its buffer."""
    if isinstance(x, GpuColumns):
        return x.start, x.stride
    return 0, x.shape[1]


@dataclass
class GpuWeight:
    """A 2-D weight [n, k] on the GPU in its GGUF type, padded to [n_pad, k_pad] with zeros.

    * ``F32``: ``data`` holds f32 [n_pad, k_pad].
    * ``F16``: ``data`` holds f16 [n_pad, k_pad] (read as u32 pairs with ``unpack2x16float``).
    * ``Q8_0``: ``data`` holds int8 [n_pad, k_pad] (read as u32 quads), ``scales`` f16
      [n_pad, k_pad/32] (rounded up to an even count per row so rows start on a u32).
    """

    name: str
    kind: str
    n: int
    k: int
    n_pad: int
    k_pad: int
    data: wgpu.GPUBuffer
    scales: wgpu.GPUBuffer | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.k)

    @property
    def scales_per_row(self) -> int:
        return q8_scales_per_row(self.k_pad)


def q8_scales_per_row(k_pad: int) -> int:
    """f16 scales per row of a Q8_0 weight's ``scales`` (even, so each row starts at a whole u32)."""
    blocks = k_pad // Q8_0_BLOCK
    return blocks + (blocks & 1)


UPLOAD_CHUNK = 4 << 20
"""Bytes of a weight copied at a time on their way to the GPU (``upload_weight``)."""


def upload_scratch() -> np.ndarray:
    """Room for the copies of one chunk of a weight (its values and its Q8_0 scales), to be used for
    weight after weight (``GpuOps.loading``). Fresh memory costs a page fault per 4 KB on its first
    write: on an H200's host 1.1 ms to fill 4 MB fresh against 0.2 ms again, 20 ms of whisper-base's
    load when each chunk had a new array."""
    return np.empty(2 * UPLOAD_CHUNK, np.uint8)


def _put_rows(device: Device, parts: list[tuple[np.ndarray, int, str]], n_pad: int,
              release: Callable[[int, int], None] | None, scratch: np.ndarray) -> list[wgpu.GPUBuffer]:
    """A buffer of [n_pad, cols] for each part (rows, cols, label; at most two parts): ``rows`` [n, ...]
    holds each row's values, at most ``cols``, in its trailing axes (a view into the file), written
    with zero padding a chunk of rows at a time. Each chunk of every part is copied once into its half
    of ``scratch`` (padded, or Q8_0's values and scales apart), sent, and with ``release`` its rows'
    pages in the file let go, before the next: whole, the token embedding's copy and pages took
    whisper-base's peak memory 75 MB above its steady size on an H200. Rows past n stay as wgpu
    made them, zero."""
    n = parts[0][0].shape[0]
    widest = max(cols * rows.dtype.itemsize for rows, cols, _ in parts)
    buffers = [device.buffer(n_pad * cols * rows.dtype.itemsize, label=label) for rows, cols, label in parts]
    step = max(1, UPLOAD_CHUNK // widest)
    if widest > UPLOAD_CHUNK:  # one row alone is wider than a chunk
        scratch = np.empty(2 * widest, np.uint8)
    halves = [scratch[i * len(scratch) // 2 : (i + 1) * len(scratch) // 2] for i in range(len(parts))]
    for start in range(0, n, step):
        for (rows, cols, _), buffer, half in zip(parts, buffers, halves):
            chunk = rows[start : start + step]
            width = chunk[:1].size
            if width == cols and chunk.flags.c_contiguous:
                block = chunk  # the file's rows are the layout already: no copy
            else:
                block = half[: len(chunk) * cols * rows.dtype.itemsize].view(rows.dtype).reshape(len(chunk), cols)
                # Each row split as the file's is ([k/32, 32] between the scales): a view of the block,
                # where reshaping the strided chunk instead would copy it into fresh memory.
                np.copyto(np.reshape(block[:, :width], chunk.shape, copy=False), chunk)
                block[:, width:] = 0
            device.queue.write_buffer(buffer, start * cols * rows.dtype.itemsize, block)
        if release is not None:
            release(start, start + step)
    return buffers


def upload_weight(device: Device, source: WeightSource, scratch: np.ndarray | None = None) -> GpuWeight:
    """Upload a GGUF weight, keeping its type, and release its rows' pages in the file (``source.release``)
    as they are sent. Conv kernels arrive flattened to 2-D by the caller. ``scratch``: an
    ``upload_scratch()`` to copy through (a new one if None)."""
    if len(source.shape) != 2:
        raise ValueError(f"{source.name}: weights must be 2-D, got shape {source.shape}")
    scratch = upload_scratch() if scratch is None else scratch
    n, k = source.shape
    n_pad = -(-n // ROW_TILE) * ROW_TILE
    k_pad = -(-k // COL_TILE) * COL_TILE
    kind = source.ggml_type
    if kind in ("F32", "F16"):
        values = np.asarray(source.data, np.float32 if kind == "F32" else np.float16).reshape(n, k)
        [data] = _put_rows(device, [(values, k_pad, source.name)], n_pad, source.release, scratch)
        return GpuWeight(source.name, kind, n, k, n_pad, k_pad, data)
    if kind == "Q8_0":
        blocks = np.asarray(source.data, np.uint8).reshape(n, k // Q8_0_BLOCK, Q8_0_BLOCK_BYTES)
        data, scales = _put_rows(device, [
            (blocks[:, :, 2:].view(np.int8), k_pad, source.name),  # [n, k/32, 32] between the scales
            (blocks[:, :, :2].view(np.float16), q8_scales_per_row(k_pad), source.name + ".scales"),  # [n, k/32, 1]
        ], n_pad, source.release, scratch)
        return GpuWeight(source.name, kind, n, k, n_pad, k_pad, data, scales)
    raise ValueError(f"{source.name}: weight type {kind} is not supported on the GPU (F32, F16, Q8_0 are)")
