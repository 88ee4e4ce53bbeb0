"""What every GPU kernel method shares: tensors in and out, weights, read-back, dispatch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

import numpy as np
import wgpu

from sayso.engine.gpu.device import Device
from sayso.engine.gpu.entry_points import ADVANCE, EntryPoint
from sayso.engine.gpu.fast import FastTier
from sayso.engine.gpu.kernels import Kernels, known_pipelines_file
from sayso.engine.gpu.recorder import DispatchRecorder, Replay
from sayso.engine.gpu.tensors import BufferPool, GpuColumns, GpuTensor, GpuWeight, ModelUpload
from sayso.engine.ops import Backend, Position, WeightSource


class GpuOpsBase(Backend):
    """Owns the device's kernel registry, recorder and buffer pool; kernel mixins build on it."""

    name = "gpu"
    runs_beside_host = True
    reads_weights_in_place = False  # each weight is read from the file into its buffers once

    @property
    def max_tensor_bytes(self) -> int:
        return self.device.max_binding

    def __init__(self, device: Device | None = None, kernels_dir: Path | None = None,
                 model: Path | None = None) -> None:
        """``kernels_dir``: where to list the pipelines built, so the next start builds them ahead
        (``engine.gpu.kernels``), a list for each ``model`` file; not on a software adapter, whose few
        cores the work needs."""
        self.device = device or Device()
        known = None
        if kernels_dir is not None and not self.device.is_cpu:
            known = known_pipelines_file(self.device, kernels_dir, model)
        self.kernels = Kernels(self.device, known)
        self.pool = BufferPool(self.device)
        self.fast = FastTier(self)
        self._loading: ModelUpload | None = None  # while ``loading``

    # What needs the device open is made at first use: a model loads while it opens (``Device``).

    @cached_property
    def recorder(self) -> DispatchRecorder:
        recorder = self.__dict__["recorder"] = DispatchRecorder(self.device, self.kernels)  # the probes use it
        self.fast.probe()  # before anything is recorded, whatever comes first
        return recorder

    @cached_property
    def reduction_threads(self) -> int:
        """Threads of a one-workgroup choice over a vocabulary (whisper_select, a transducer's choose): as
        many as the device allows, up to 1024 (a power of two, at most 24 bytes of workgroup memory each).
        Such a kernel's time is each thread's walk over n_vocab / threads logits, one step after another."""
        limits, threads = self.device.limits, 1024
        while threads > 64 and (threads > limits["max-compute-invocations-per-workgroup"]
                                or 24 * threads > limits["max-compute-workgroup-storage-size"]):
            threads //= 2
        return threads

    @cached_property
    def zero_counter(self) -> wgpu.GPUBuffer:
        """The counter bound where a kernel takes an int position: a zero that nothing advances."""
        return self.device.buffer(16, label="zero-position")

    def describe(self) -> str:
        return f"{self.device.describe()} | {self.fast.describe()}"

    # ---- tensors --------------------------------------------------------------------------------

    def empty(self, shape: Sequence[int], dtype=np.float32) -> GpuTensor:
        """A pooled tensor with undefined contents, for a kernel to write."""
        return GpuTensor(self.pool, tuple(shape), dtype)

    def _upload(self, array: np.ndarray) -> GpuTensor:
        if self._loading is not None:
            return self._loading.tensor(array)  # a model's constant
        out = self.empty(array.shape, array.dtype)
        if array.size:
            # A pooled buffer may have been freed while a recorded, unsubmitted dispatch still reads
            # it. queue.write_buffer would land before that dispatch runs, so submit first.
            self.recorder.submit()
            try:
                self.device.queue.write_buffer(out.buffer, 0, array)
            except wgpu.GPUError as error:  # a lost device: said plainly, as a new buffer's failure is
                raise self.device.failure("uploading a tensor", error) from None
        return out

    def tensor(self, array: np.ndarray) -> GpuTensor:
        return self._upload(np.ascontiguousarray(array, dtype=np.float32))

    def ids(self, ids: np.ndarray) -> GpuTensor:
        return self._upload(np.ascontiguousarray(ids, dtype=np.uint32).reshape(-1))

    @contextmanager
    def loading(self):
        self._loading = ModelUpload(self.device)
        try:
            yield
        finally:
            upload, self._loading = self._loading, None
            upload.finish()
        self.fast.probe()  # decided once loaded, so that the engine's describe() names the fast kernels

    def weight(self, source: WeightSource) -> GpuWeight:
        """Inside ``loading`` the weight's copy goes on beside the loader's next steps; outside, it is
        whole when this returns (``ModelUpload``)."""
        if self._loading is not None:
            return self._loading.weight(source)
        upload = ModelUpload(self.device, threads=0)
        weight = upload.weight(source)
        upload.finish()
        return weight

    def read(self, x: GpuTensor | GpuColumns) -> np.ndarray:
        return self.read_later(x)()

    def read_later(self, x: GpuTensor | GpuColumns) -> Callable[[], np.ndarray]:
        if isinstance(x, GpuColumns):  # one row's columns, or whole rows, lie together in its buffer
            if x.shape[0] != 1 and x.width != x.stride:
                raise ValueError(f"only one row's columns are read back, not {x.shape[0]} rows'")
            itemsize = x.tensor.dtype.itemsize
            tensor, start, nbytes = x.tensor, x.start * itemsize, x.shape[0] * x.width * itemsize
        else:
            tensor, start, nbytes = x, 0, x.nbytes
        fetch = self.recorder.read_later(tensor.buffer, nbytes, start)
        return lambda: np.frombuffer(fetch(), dtype=tensor.dtype).reshape(x.shape).copy()

    def flush(self) -> None:
        self.recorder.submit()

    def close(self) -> None:
        self.device.close()

    def repeatable(self, record):
        return Replay(self.recorder, record)

    # ---- positions on the GPU -------------------------------------------------------------------

    def position(self, value: int) -> Position:
        return Position(self.ids(np.array([value])))

    def advance(self, position: Position, by: int) -> None:
        self.run(ADVANCE, [position.counter], [by], (1, 1, 1))

    def counter_and_offset(self, position: int | Position) -> tuple[wgpu.GPUBuffer, int]:
        """What a kernel that reads a position binds and takes as a parameter: a ``Position``'s
        counter and offset, or for an int the zero counter and the int (the kernel adds the two)."""
        if isinstance(position, Position):
            return position.counter.buffer, position.offset
        return self.zero_counter, position

    @contextmanager
    def errors(self, what: str):
        """wgpu errors raised inside (a lost device fails the next wgpu call) become ``GpuError``:
        kernels and uploads call wgpu in many places, and this is the one boundary they all cross."""
        try:
            yield
        except wgpu.GPUError as error:
            raise self.device.failure(what, error) from None

    # ---- dispatch -------------------------------------------------------------------------------

    def run(
        self,
        entry_point: EntryPoint,
        buffers: Sequence,
        params: Sequence[int | float],
        groups: tuple[int, int, int],
        **constants: float,
    ) -> None:
        """Record ``entry_point``, or its fast version where that is on, over ``buffers`` (tensors,
        weights' buffers or raw wgpu buffers, bound at 1.. in order) with ``params`` (one per field
        of its parameter struct) in the uniform at binding 0."""
        if self._loading is not None:
            raise RuntimeError(f"{entry_point.name} was run while a model loads: its weights are not on the GPU yet")
        recorder = self.recorder  # made at the first use, which probes the fast tier first
        entry_point = self.fast.version(entry_point)
        raw = [b.buffer if isinstance(b, GpuTensor) else b for b in buffers]
        pipeline = self.kernels.pipeline(entry_point.file, entry_point.entry, **constants)
        recorder.dispatch(pipeline, entry_point, raw, params, groups)
