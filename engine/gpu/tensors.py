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
import mmap
import threading
from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import wgpu

from sayso.engine.gguf.q8_0 import Q8_0_BLOCK, Q8_0_BLOCK_BYTES
from sayso.engine.gpu.device import Device
from sayso.engine.ops import WeightSource

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
    """A float32 (or uint32 for ids) tensor in a pooled GPU buffer. ``shape`` is logical, row-major.
    Without a pool: a model's constant, in a buffer of its own that ``ModelUpload`` makes."""

    __slots__ = ("buffer", "shape", "dtype", "pool")

    def __init__(self, pool: BufferPool | None, shape: tuple[int, ...], dtype=np.float32) -> None:
        self.pool = pool
        self.shape = tuple(map(int, shape))
        self.dtype = np.dtype(dtype)
        self.buffer = pool.take(self.nbytes) if pool is not None else None

    def __del__(self) -> None:
        # Back to the pool as soon as the last reference goes (CPython frees deterministically);
        # cheaper per tensor than weakref.finalize, which a decoder step pays ~65 times.
        buffer = getattr(self, "buffer", None)  # None when take() failed in __init__
        if buffer is not None and self.pool is not None:
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
    """Columns ``start .. start+width`` of a tensor [T, N] (``Ops.columns``), or ``height`` of its rows
    from the one ``start`` begins (``Ops.rows``: ``start`` a multiple of N), left in place: the kernels
    that take one (kv_pack, attend) get the first float and the row stride N as parameters."""

    tensor: GpuTensor
    start: int
    width: int
    height: int | None = None  # None: every row

    @property
    def shape(self) -> tuple[int, int]:
        return (self.tensor.shape[0] if self.height is None else self.height, self.width)

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
    data: wgpu.GPUBuffer | None  # None only while ``ModelUpload`` makes it
    scales: wgpu.GPUBuffer | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.k)

    @property
    def scales_per_row(self) -> int:
        return q8_scales_per_row(self.k_pad)


def _row_parts(kind: str, rows: np.ndarray, k: int, values: np.dtype) -> list[np.ndarray]:
    """Rows of a weight's file data ([rows, K] values, or [rows, K/32*34] Q8_0 blocks) split as its
    buffers hold them: the values (an F32 or F16 weight's as ``values``), and Q8_0's scales apart,
    each [rows, items, ...]."""
    if kind != "Q8_0":
        return [np.asarray(rows, values).reshape(len(rows), k)]
    blocks = np.asarray(rows, np.uint8).reshape(len(rows), k // Q8_0_BLOCK, Q8_0_BLOCK_BYTES)
    # Each block's 32 values as one 32-byte item: numpy then copies an item per block rather than 32
    # int8s, faster from the blocks' 34-byte stride (docs/PERFORMANCE.md: weight upload).
    return [blocks[:, :, 2:].view(f"V{Q8_0_BLOCK}"), blocks[:, :, :2].view(np.float16)]


def q8_scales_per_row(k_pad: int) -> int:
    """f16 scales per row of a Q8_0 weight's ``scales`` (even, so each row starts at a whole u32)."""
    blocks = k_pad // Q8_0_BLOCK
    return blocks + (blocks & 1)


UPLOAD_CHUNK = 2 << 20
"""Bytes of a weight read and copied at a time (``ModelUpload``), through memory each loading thread
reuses."""

UPLOAD_THREADS = 4
"""Threads that make weights' buffers and copy into them while a model loads (``ModelUpload``)."""

STAGING_BYTES = 32 << 20
"""Bytes of weights mapped for writing at once while a model loads (``ModelUpload``): enough to keep
the copying threads busy between the waits, small beside a large model."""


class ModelUpload:
    """A model's weights and small tensors on their way to the GPU while it loads (``Ops.loading``);
    weights keep their GGUF type.

    A weight's buffers are created mapped: wgpu stages them in memory the host can write and copies them
    into place with the next submission once they are unmapped. That staging memory can be the host's
    own (resident in this process), so at most ``STAGING_BYTES`` are mapped at a time: past that, the
    weights so far are finished (``_send_mapped``) before the next one is mapped: wgpu keeps the staging
    it has made for reuse, so a load's peak stays near its steady size rather than twice the weights.
    The rows are read from the file a chunk at a time (``WeightSource.read``) and copied into that
    mapping, laid out as the kernels read them (padded, Q8_0's values and scales apart), so the model
    file's private copy never holds them: filling it cost more than the reads (its pages are allocated
    and zeroed first), and the whole token embedding there beside its upload raised a load's peak well
    above its steady size. A weight made in memory (a table the loader computed) is copied from its
    ``data``.
    Padding is free: a buffer mapped at creation starts as zeros.

    Each weight is one job on ``threads`` threads, buffers and copy, while the loader's Python goes on
    to the next weight: creating a mapped buffer (wgpu zeroes its staging) and copying are C and numpy
    that let go of the GIL; on the loader's thread, through a scratch array and ``queue.write_buffer``
    (or mapped but still there), the copies would be most of a load (docs/PERFORMANCE.md: weight upload).

    The device may still be opening (``Device``): jobs wait for it on their threads, and the loader's
    Python goes on rather than wait for it. Small tensors (biases, norms, tables: hundreds in a model)
    are constants outside the buffer pool (``tensor``): ``finish`` makes their buffers and sends their
    values as one write and a copy each, since a ``write_buffer`` apiece, each with a staging buffer of
    its own, is a noticeable part of a load.

    A weight's ``data`` and ``scales`` are set by its job, a constant's ``buffer`` by ``finish``:
    nothing may use either before.
    """

    def __init__(self, device: Device, threads: int = UPLOAD_THREADS) -> None:
        self.device = device
        self.copying = ThreadPoolExecutor(threads, thread_name_prefix="weight-upload") if threads else None
        self.jobs: list[Future] = []
        self.mapped: list[wgpu.GPUBuffer] = []
        self.mapped_bytes = 0  # of the weights given to jobs since the last ``_send_mapped``
        self.constants: list[tuple[GpuTensor, np.ndarray]] = []
        self._scratches = threading.local()  # ``_scratch``: its threads' read memory, gone with them

    def tensor(self, values: np.ndarray) -> GpuTensor:
        """A constant holding ``values`` (contiguous, 4-byte items: float32 or uint32) once ``finish``
        has made its buffer."""
        tensor = GpuTensor(None, values.shape, values.dtype)
        self.constants.append((tensor, values))
        return tensor

    def weight(self, source: WeightSource) -> GpuWeight:
        """``source`` [n, k] padded to [n_pad, k_pad] in its type (conv kernels arrive flattened to
        2-D by the caller); with threads, its buffers may not exist yet when this returns."""
        if len(source.shape) != 2:
            raise ValueError(f"{source.name}: weights must be 2-D, got shape {source.shape}")
        n, k = source.shape
        n_pad = -(-n // ROW_TILE) * ROW_TILE
        k_pad = -(-k // COL_TILE) * COL_TILE
        kind = source.ggml_type
        if kind in ("F32", "F16"):
            layout = [(np.dtype(np.float32 if kind == "F32" else np.float16), k_pad, source.name)]
        elif kind == "Q8_0":
            layout = [(np.dtype(f"V{Q8_0_BLOCK}"), k_pad // Q8_0_BLOCK, source.name),  # a block's 32 values
                      (np.dtype(np.float16), q8_scales_per_row(k_pad), source.name + ".scales")]
        else:
            raise ValueError(f"{source.name}: weight type {kind} is not supported on the GPU (F32, F16, Q8_0 are)")
        weight = GpuWeight(source.name, kind, n, k, n_pad, k_pad, data=None)
        size = sum(n_pad * cols * item.itemsize for item, cols, _ in layout)
        if self.mapped_bytes and self.mapped_bytes + size > STAGING_BYTES:
            self._send_mapped()
        self.mapped_bytes += size
        job = partial(self._put_rows, weight, layout, source)
        if self.copying is None:
            job()
        else:
            self.jobs.append(self.copying.submit(job))
        return weight

    def _put_rows(self, weight: GpuWeight, layout: list[tuple[np.dtype, int, str]], source: WeightSource) -> None:
        """``weight``'s buffers, mapped, of [n_pad, cols] items for each part of ``layout`` (item, cols,
        label), filled from ``source`` a chunk of rows at a time (``WeightSource.read``)."""
        buffers, targets = [], []
        for item, cols, label in layout:
            buffer = self.device.buffer(weight.n_pad * cols * item.itemsize, label=label, mapped=True)
            self.mapped.append(buffer)  # one bytecode under the GIL: safe from several threads
            mapping = buffer._experimental_get_mapped_range(0, buffer.size)  # wgpu is pinned (pyproject)
            buffers.append(buffer)
            targets.append(np.frombuffer(mapping, item, weight.n_pad * cols).reshape(weight.n_pad, cols))
        weight.data, weight.scales = buffers[0], (buffers[1] if len(buffers) > 1 else None)
        n, k = weight.n, weight.k
        widest = max(source.row_bytes, *(target.strides[0] for target in targets))  # bytes of a row
        step = max(1, UPLOAD_CHUNK // widest)
        scratch = self._scratch(step * source.row_bytes)
        for start in range(0, n, step):
            stop = min(n, start + step)
            rows = source.read(start, stop, scratch)
            for part, target in zip(_row_parts(source.ggml_type, rows, k, targets[0].dtype), targets):
                # Each row as the file has it ([k/32, 1] blocks between the scales): a view of the target.
                np.copyto(np.reshape(target[start:stop, : part[:1].size], part.shape, copy=False), part)

    def _scratch(self, nbytes: int) -> memoryview:
        """This thread's memory for the rows it reads, at least ``nbytes``, reused weight after weight.
        Mapped for the load alone: the heap would keep a freed chunk's memory (``engine.heap``), and
        each thread's heap would keep its own."""
        held = getattr(self._scratches, "memory", None)
        if held is None or len(held) < nbytes:
            held = self._scratches.memory = mmap.mmap(-1, max(nbytes, UPLOAD_CHUNK))
        return memoryview(held)

    def finish(self) -> None:
        """Make and send the constants; wait for every job, then unmap the buffers (after a failed
        job too: nothing writes to them any more), so that wgpu sends them with the next submission;
        raise the first error."""
        try:
            self._send_constants()
        finally:
            try:
                self._send_mapped()
            finally:
                if self.copying is not None:
                    self.copying.shutdown()

    def _send_mapped(self) -> None:
        """Wait for every job, unmap their buffers (after a failed job too: nothing writes to them any
        more) and submit, so that wgpu copies them into place and can let their staging go; raise the
        first job's error."""
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            job.exception()  # waits: every job has ended before anything is unmapped
        mapped, self.mapped, self.mapped_bytes = self.mapped, [], 0
        for buffer in mapped:
            buffer.unmap()
        if mapped:
            self.device.queue.submit([])
        for job in jobs:
            job.result()

    def _send_constants(self) -> None:
        """Every constant's buffer, and their values in one buffer, written once, then copied into place."""
        constants, self.constants = self.constants, []
        if not constants:
            return
        blob = np.concatenate([values.reshape(-1).view(np.uint8) for _, values in constants])
        staging = self.device.buffer(len(blob), wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST, "constants")
        self.device.queue.write_buffer(staging, 0, blob)  # a queue's writes land before its next submission
        encoder = self.device.device.create_command_encoder()
        offset = 0
        for tensor, values in constants:
            tensor.buffer = self.device.buffer(values.nbytes, label="constant")
            if values.nbytes:
                encoder.copy_buffer_to_buffer(staging, offset, tensor.buffer, 0, values.nbytes)
            offset += values.nbytes
        self.device.queue.submit([encoder.finish()])
